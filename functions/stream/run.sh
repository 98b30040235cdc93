#!/bin/sh
# The run and resume functions: the streaming AG-UI app (interlock.api.stream) served by
# uvicorn (interlock.api.serve) behind the AWS Lambda Web Adapter, which starts this
# script (the function's handler) through AWS_LAMBDA_EXEC_WRAPPER and sends requests to
# AWS_LWA_PORT. INTERLOCK_FUNCTION says which one this is. Layers are unpacked under
# /opt/python; the adapter runs this script, not the Python runtime's own bootstrap, so
# the path is set here.
PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:${LAMBDA_RUNTIME_DIR}" \
    exec python -m interlock.api.serve
