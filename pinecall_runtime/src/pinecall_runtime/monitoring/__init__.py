"""The operator's picture (issue 22): the alert rules (:mod:`.alerts`), the Grafana dashboard
(:mod:`.dashboard`) and the Prometheus ``up --prometheus`` runs (:mod:`.prometheus`).

The rules and the dashboard are made here and written to ``deploy/charts/pinecall/files/``
(``python -m pinecall_runtime.monitoring``): the chart wraps them in a ``PrometheusRule`` and a
Grafana sidecar's ``ConfigMap``, and they are plain files for a Prometheus or a Grafana without
the operator. ``tests/deploy/test_monitoring.py`` fails when a committed file is not what this
makes.
"""
