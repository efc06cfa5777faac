"""The team dashboard: a small web app over the marts, charts rendered on the server."""
