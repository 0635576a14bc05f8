"""The daemon's data model: statuses and the records the store keeps (missions, tasks, attempts, assessments)."""
