"""Floor 2: task threads, the conversation an agent pulls on demand.

* :mod:`.select`: which rounds fit a budget, and the gaps left (pure).
* :mod:`.format`: the text view, header + YAML frontmatter + content (pure).
* :mod:`.service`: reading a view from the bus and appending rounds.
"""
