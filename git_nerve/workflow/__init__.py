"""Workflows: roles on agent CLIs, typed results, a moderator (RFC-003).

* :mod:`.spec`: authoring (:class:`Workflow`, :class:`Role`, :class:`Thread`, ``END``/``fail``);
* :mod:`.adapters`: the capabilities (agent CLIs, OpenAI-compatible HTTP);
* :mod:`.extract`: raw output -> the role's pydantic meta;
* :mod:`.config`: ``nerve.toml`` ([extract], [adapters.<name>]);
* :mod:`.loader`: ``.nerve/workflows/<name>.py``, installed modules, built-ins;
* :mod:`.runner`: `git nerve run`; :mod:`.validate`: `git nerve validate`;
  :mod:`.wrap`: `git worker run`.
"""

from .adapters.base import AgentContext, StartFrame
from .spec import END, End, Role, Thread, Workflow, end, fail

__all__ = ["END", "AgentContext", "End", "Role", "StartFrame", "Thread", "Workflow", "end", "fail"]
