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
    required = [f.name for f in fs if f.default is _MISSING and f.default_factory is _MISSING]
    for before, after in zip(fs, fs[1:]):
        if after.name in required and before.name not in required:
            raise TypeError(f"non-default argument {after.name!r} follows default argument")
    cls.__record_fields__ = fs
    methods = _methods(cls, fs, frozen)
    for name in ("__init__", "__repr__", "__eq__"):
        if name not in cls.__dict__:  # as dataclasses: what the class defines itself is kept
            _put(cls, name, methods[name])
    if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        cls.__hash__ = _put(cls, "__hash__", methods["__hash__"]) if frozen else None
    if frozen:
        _put(cls, "__setattr__", methods["__setattr__"])
        _put(cls, "__delattr__", methods["__delattr__"])
    cls.__match_args__ = tuple(f.name for f in fs)
    return cls


def _methods(cls, fs: tuple[_Field, ...], frozen: bool) -> dict:
    """Plain functions over the fields, no generated code: compiling it (as dataclasses does) cost ~0.4 ms a class."""
    names = tuple(f.name for f in fs)
    compared = tuple(f.name for f in fs if f.compare)
    put = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")

    def __init__(self, *args, **kwargs):
        if len(args) > len(fs):
            raise TypeError(f"__init__() takes {len(fs) + 1} positional arguments but {len(args) + 1} were given")
        for i, f in enumerate(fs):
            if i < len(args):
                if f.name in kwargs:
                    raise TypeError(f"__init__() got multiple values for argument {f.name!r}")
                value = args[i]
            elif f.name in kwargs:
                value = kwargs.pop(f.name)
            elif f.default is not _MISSING:
                value = f.default
            elif f.default_factory is not _MISSING:
                value = f.default_factory()
            else:
                raise TypeError(f"__init__() missing 1 required positional argument: {f.name!r}")
            put(self, f.name, value)
        if kwargs:
            raise TypeError(f"__init__() got an unexpected keyword argument {next(iter(kwargs))!r}")
        if post_init:
            self.__post_init__()

    def __repr__(self):
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in compared) == tuple(getattr(other, n) for n in compared)

    def __hash__(self):
        return hash(tuple(getattr(self, n) for n in compared))

    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__, "__hash__": __hash__,
            "__setattr__": __setattr__, "__delattr__": __delattr__}


def _put(cls, name: str, fn):
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)
    return fn
