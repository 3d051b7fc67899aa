"""Record classes for the agent's hot paths, without :mod:`dataclasses` (issue 27).

``@record`` (and ``@record(frozen=True)``) makes what ``@dataclass`` makes of the same class body, for the parts
git-nerve uses: an ``__init__`` taking the annotated fields in order (defaults, ``field(default_factory=...)``),
``__repr__`` (``Name(a=1, b='x')``), ``__eq__`` over the compared fields of two objects of the same class,
``__hash__`` (None, or, frozen, the compared fields' hash), assignment refused on a frozen one
(:class:`FrozenInstanceError`, an AttributeError like dataclasses'), ``__post_init__`` called when defined;
:func:`replace` and :func:`fields` as dataclasses' (by name). Importing dataclasses (it imports ``inspect``) and
making a class with it cost `git worker start` more CPU than its work: about 8 ms and 0.4 ms a class.

Standard library only, and nothing of git_nerve: every floor may use it.
"""

from __future__ import annotations

__all__ = ["FrozenInstanceError", "field", "fields", "record", "replace"]

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (as dataclasses.FrozenInstanceError)."""


class _Field:
    __slots__ = ("name", "default", "default_factory", "compare")

    def __init__(self, default=_MISSING, default_factory=_MISSING, compare: bool = True):
        self.name = ""
        self.default, self.default_factory, self.compare = default, default_factory, compare

    def __repr__(self) -> str:
        return f"field({self.name!r})"


def field(*, default=_MISSING, default_factory=_MISSING, compare: bool = True):
    """A field's default (or factory, for mutable defaults) and whether ``==`` and the hash compare it."""
    if default is not _MISSING and default_factory is not _MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return _Field(default, default_factory, compare)


def fields(obj_or_cls) -> tuple[_Field, ...]:
    return getattr(obj_or_cls, "__record_fields__")


def replace(obj, /, **changes):
    """A copy of ``obj`` with ``changes`` (as dataclasses.replace)."""
    return obj.__class__(**{**{f.name: getattr(obj, f.name) for f in fields(obj)}, **changes})


def record(cls=None, /, *, frozen: bool = False):
    """``@record`` / ``@record(frozen=True)``: see the module."""
    def wrap(c):
        return _make(c, frozen)

    return wrap if cls is None else wrap(cls)


def _own_fields(cls) -> list[_Field]:
    out = []
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(kind, str) and kind.replace("typing.", "").startswith("ClassVar"):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, _Field) else _Field(default=value)
        f.name = name
        if isinstance(value, _Field):  # as dataclasses: the class keeps a plain default, not the field
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        out.append(f)
    return out


def _make(cls, frozen: bool):
    by_name: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            by_name[f.name] = f
    for f in _own_fields(cls):
        by_name[f.name] = f
    fs = tuple(by_name.values())
    cls.__record_fields__ = fs
    glob: dict = {"_MISSING": _MISSING, "_cls": cls, "_Frozen": FrozenInstanceError, "_setattr": object.__setattr__}
    params, body = [], []
    for f in fs:
        if f.default is not _MISSING:
            glob[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
            value = f.name
        elif f.default_factory is not _MISSING:
            glob[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            value = f"_f_{f.name}() if {f.name} is _MISSING else {f.name}"
        else:
            if params and params[-1].find("=") > 0:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            params.append(f.name)
            value = f.name
        body.append(f"_setattr(self, {f.name!r}, {value})" if frozen else f"self.{f.name} = {value}")
    if "__post_init__" in dir(cls):
        body.append("self.__post_init__()")
    compared = [f.name for f in fs if f.compare]
    own = "".join(f"self.{n}," for n in compared)
    other = "".join(f"other.{n}," for n in compared)
    reprs = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fs)
    src = [f"def __init__(self, {', '.join(params)}):", *(f"  {b}" for b in body or ["pass"]),
           "def __repr__(self):", f"  return self.__class__.__qualname__ + f\"({reprs})\"",
           "def __eq__(self, other):", f"  return ({own}) == ({other}) if other.__class__ is self.__class__ else NotImplemented",
           "def __hash__(self):", f"  return hash(({own}))",
           "def __setattr__(self, name, value):",
           "  if type(self) is _cls or name in _names: raise _Frozen(f'cannot assign to field {name!r}')",
           "  super(_cls, self).__setattr__(name, value)",
           "def __delattr__(self, name):",
           "  if type(self) is _cls or name in _names: raise _Frozen(f'cannot delete field {name!r}')",
           "  super(_cls, self).__delattr__(name)"]
    glob["_names"] = frozenset(f.name for f in fs)
    made: dict = {}
    exec("\n".join(src), glob, made)  # noqa: S102 - code made of the class's own field names, as dataclasses does
    for name in ("__init__", "__repr__", "__eq__"):  # as dataclasses: what the class defines itself is kept
        if name not in cls.__dict__:
            _put(cls, name, made[name])
    if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        cls.__hash__ = _put(cls, "__hash__", made["__hash__"]) if frozen else None
    if frozen:
        _put(cls, "__setattr__", made["__setattr__"])
        _put(cls, "__delattr__", made["__delattr__"])
    cls.__match_args__ = tuple(f.name for f in fs)
    return cls


def _put(cls, name: str, fn):
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)
    return fn
