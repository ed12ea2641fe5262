"""The service's routes, one module per resource; each exports ``router`` (listed in jobs/service/app.py)."""
