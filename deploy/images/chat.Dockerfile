# syntax=docker/dockerfile:1
# chat: written calls: the web chat and WhatsApp threads.
# It installs pinecall-chat and the CLI that mounts its commands (pinecall-runtime),
# from uv.lock, and nothing else of the workspace. Build from the repository's root:
#   docker build -f deploy/images/chat.Dockerfile -t pinecall-chat .
# The Pants image of build-support/macros.py runs the same commands from a PEX.

FROM python:3.11-slim-bookworm AS build
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/app
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable --package pinecall-chat --package pinecall-runtime

FROM python:3.11-slim-bookworm
RUN useradd --uid 10001 --user-group --no-log-init --no-create-home --shell /usr/sbin/nologin pinecall
COPY --from=build /app /app
ENV PATH=/app/bin:$PATH PYTHONUNBUFFERED=1 PINECALL_HOST=0.0.0.0
USER 10001:10001
# PINECALL_PORT
EXPOSE 8106
ENTRYPOINT ["pinecall-runtime", "chat"]
CMD ["serve"]
