"""The HTTP surface: routes, request models, AG-UI rendering and the error map."""
