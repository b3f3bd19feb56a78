#!/bin/sh
# rvport: starts the vLLM Semantic Router in its runtime image, as its non-root user. The root filesystem is
# read-only: the working directory and HOME are /tmp (a tmpfs), so whatever the router writes goes there.
# ExtProc (gRPC) on ROUTER_PORT, the API server on ROUTER_API_PORT, metrics on ROUTER_METRICS_PORT.
set -eu
cd /tmp
export HOME=/tmp
exec /app/router -config "${ROUTER_CONFIG:-/app/config/config.yaml}" -port "${ROUTER_PORT:-50051}" \
  -api-port "${ROUTER_API_PORT:-8080}" -metrics-port "${ROUTER_METRICS_PORT:-9190}" "$@"
