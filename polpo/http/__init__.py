"""The daemon's HTTP side (``[http] listen``): the JSON API, Server-Sent Events, ``/metrics`` and the web view.

Built on Starlette and served by uvicorn inside the daemon's own event loop and task group; off by default.
"""
