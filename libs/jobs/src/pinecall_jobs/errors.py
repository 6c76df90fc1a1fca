"""The jobs' errors: one small tree; the call log's own are :mod:`pinecall_clients.errors`.

::

    JobError
    ├── OfferUnreadable    the job's metadata is not a JobOffer (a dispatch the runtime did not
    │                      make, or a newer one's .v2): the job says nothing and ends
    └── CallTaken          the call was opened by another worker (a 409 at open): the job leaves
                           the caller to that worker and ends
"""

from __future__ import annotations


class JobError(Exception):
    """Base of the tree."""


class OfferUnreadable(JobError):
    pass


class CallTaken(JobError):
    pass
