"""What the daemon tells monitoring: Prometheus metrics and OpenTelemetry traces, both derived from the events.

Both follow the committed event stream (``store.subscribe``), so they cost the task path one cheap call per
event and can never disagree with ``events.jsonl``; what an event does not carry (a reviewer's tokens and cost)
is read back from the store afterwards, off the writer's path.
"""
