"""The REST routes under ``/v1``, one module per resource."""
