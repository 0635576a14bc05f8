"""Which files an attempt changed, found fast and attributed only when that is certain.

:mod:`.tracker` is the entry point (the runner opens a window before the agent and closes it after); :mod:`.watch`
and :mod:`.inotify` watch a workspace, :mod:`.classify` turns what was seen into created / modified / deleted
(asking ``git status`` about just those paths in a repository), :mod:`.patterns` keeps agents' own state files out.
"""
