"""Deadlines on missions and tasks: pure SLA arithmetic (:mod:`.deadlines`) and the periodic check (:mod:`.monitor`)."""
