#!/bin/sh
# The run and resume functions: the streaming AG-UI app (interlock.api.stream) served by
# uvicorn behind the AWS Lambda Web Adapter, which starts this script (the function's
# handler) through AWS_LAMBDA_EXEC_WRAPPER. INTERLOCK_FUNCTION says which one this is.
# Layers are unpacked under /opt/python; the adapter runs this script, not the Python
# runtime's own bootstrap, so the path is set here.
PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR}" \
    exec python -m uvicorn --factory interlock.api.stream:create_app \
    --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" \
    --no-access-log --log-level warning --timeout-graceful-shutdown 1
