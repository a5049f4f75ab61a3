"""Defenses defined outside privaudit: found by import path or by entry point, registered by name.

A `[[defense]]` table's `kind` is one of

* a registered name: a shipped defense (`dpsgd`, ...) or one found before;
* an import path, `kind = "mypkg.module:MyDefense"`: the module is imported (from `sys.path`, and
  from the current directory when it is not found there, as `python -m` would), and the attribute
  must be a concrete `Defense` subclass with a `name`, a `title` and a `Params` model. Importing
  runs the module's code, so a campaign file lists such modules in `[campaign] imports` and the
  command needs `--allow-code`: a `Consent` that `resolve` checks where it imports, so no shape of
  a campaign's input reaches an import without it;
* the name of an entry point in the group `privaudit.defenses` of an installed package, loaded the
  first time that name is not registered. The entry point's name must be the class's `name`:

      [project.entry-points."privaudit.defenses"]
      my_defense = "mypkg.module:MyDefense"

However it is found, the class is registered in `DEFENSES` under its `name`, and that name is the
defense from then on: the table's `kind` after validation, the cell ids, the rows' `defense`, the
transcripts' `public.defense` and the extractors' keys. The same class therefore gives the same
cells whether a campaign names it by path or by entry point; a name another class already holds (a
shipped defense's) is refused.

Attacks read a defense's messages through its view (`privaudit.attacks.views`: extractors keyed by defense
name and scenario, a model view, a canary channel, ...). A module outside privaudit registers its
own at import, at the top level, beside the class:

    register_extractor(Extractor("my_defense", "state_difference", my_extract, ...))

so importing the module is all it takes, in the driver and in every worker process (which imports
it again from the path `resolve` found it at). This module imports no attack: defenses never do.

A module's code is part of the identity of the cells that run it (`plugin_code`: a hash of the
bytes each module was imported from), so editing it reruns them. A process that imported a module
before it was edited (a notebook calling `privaudit.run` twice) imports it anew when a campaign
names it again (`resolve`), so the hash always names the code that runs.
`examples/laplace_gossip.py` and `examples/share_gossip.py` are complete third-party defenses with their views.

A model factory named by path (`model = "mypkg.models:build"`) is imported the same way, with the
same consent (`load_path`), and its module is part of its cells' identity the same way
(`plugin_code`'s `others`); one named by entry point is found in its own group
(`load_entry_point`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
import sys
import weakref
from dataclasses import dataclass
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType

from privaudit.defenses.base import DEFENSES, Defense, DefenseParams
from privaudit.accounting import Claim, ClaimThreat, Neighbours

ENTRY_POINTS = "privaudit.defenses"
"""The entry-point group installed packages list their defenses in."""


@dataclass(frozen=True)
class Consent:
    """The user's consent to import the modules a campaign names by path: the modules it lists in
    `[campaign] imports` and whether the user agreed (`--allow-code`, `allow_code=True`). `resolve`
    checks it at the one place a module named by a campaign is imported, so the consent follows
    from the validated campaign, not from the shape of its input (a tuple of tables, a mapping
    proxy)."""

    listed: tuple[str, ...] = ()
    given: bool = False

    def check(self, module: str, what: str = "a defense kind") -> None:
        """Nothing when `module` may be imported; else ValueError saying what the campaign or the
        user must do. `what` names the field that imports it (a defense's kind, a model)."""
        if module not in self.listed:
            raise ValueError(f"{what} imports module '{module}', which runs its code: list it in [campaign] "
                             f"imports = {[*self.listed, module]!r} and pass --allow-code")
        if not self.given:
            raise ValueError(f"this campaign imports code ({module}, [campaign] imports): read it, then pass "
                             "--allow-code to run it")


NO_CONSENT = Consent()
"""No module may be imported: the default of every caller that was not given consent."""


def resolve(kind: str, consent: Consent = NO_CONSENT) -> type[Defense]:
    """The defense class `kind` names (a registered name, `module:Class` or an entry point's
    name), registered under its `name`; ValueError, one line, naming what is wrong. A module named
    by path is imported only with `consent` (installed entry points and shipped defenses need none:
    installing a package is the consent to its code)."""
    if kind in DEFENSES:
        return DEFENSES[kind]
    if ":" in kind:
        return _register(_checked(load_path(kind, consent), kind))
    entry = _entry_point(kind)
    if entry is None:
        names = list(DEFENSES) + sorted(set(_entry_point_names()) - set(DEFENSES))
        raise ValueError(f"unknown defense '{kind}' (choose from {', '.join(names)}; or give an import path "
                         "'package.module:Class')")
    where = f"entry point '{kind}' of group {ENTRY_POINTS}"
    path = f"{entry.module}:{entry.attr}"
    found = _checked(load_attribute(path, f"{where}: "), path)
    if found.name != kind:
        raise ValueError(f"{where} loads a defense named '{found.name}': the entry point's name must be the "
                         "class's name")
    return _register(found)


def load_path(path: str, consent: Consent = NO_CONSENT, what: str = "a defense kind") -> object:
    """The object at the import path `package.module:attribute` that a campaign names (a defense's
    class, a model's factory), its module imported only with `consent` (`what` names the field in
    the error) and imported anew when its file was edited since this process imported it
    (`_reload_edited`); ValueError, one line, naming what is wrong."""
    module = path.partition(":")[0].strip()
    consent.check(module, what)
    _reload_edited([*consent.listed, module])
    return load_attribute(path)


def load_entry_point(group: str, name: str) -> object | None:
    """The object the installed entry point `name` of `group` loads (installing its package is the
    consent to its code), None when no package installs one; ValueError naming the entry point
    when it cannot be loaded."""
    entry = _entry_point(name, group)
    if entry is None:
        return None
    return load_attribute(f"{entry.module}:{entry.attr}", f"entry point '{name}' of group {group}: ")


SHIPPED = frozenset(DEFENSES)
"""The defenses privaudit ships (registered when `defenses` is imported, before this module)."""


def load_installed() -> list[str]:
    """Load and register every defense installed under the entry-point group, so a listing shows
    them; one line per entry point that cannot be loaded, naming what is wrong."""
    problems = []
    for name in _entry_point_names():
        try:
            resolve(name)
        except ValueError as error:
            problems.append(f"{name}: {error}")
    return problems


DEFAULT_NEIGHBOURS = Neighbours("replace-one", "record", "privaudit's default: the claim states no relation")
"""The neighbouring relation a defense written elsewhere is audited under when its claim states an
ε but no `neighbours`: one record of the agent's data replaced by another, the relation the
law-free canary audit and the reconstruction game test. It is a guess at what the author meant,
so the claim carries it as an assumption (`ASSUMED_RELATION`, which `claims` and the report show)
and `check` and `run` warn of it (`relation_warning`): an add/remove claim audited under it can be
refuted by a bound up to twice its ε, which is why the author should state theirs."""

ASSUMED_RELATION = ("the claim states no neighbouring relation: privaudit audits it under its default, replace-one "
                    "of one record; state yours in the Claim: neighbours=Neighbours('replace-one') or "
                    "Neighbours('add/remove') (privaudit.accounting.Neighbours)")
"""The assumption a claim given `DEFAULT_NEIGHBOURS` carries, in the words `claims` prints."""


DEFAULT_THREAT = ClaimThreat("honest-but-curious", "privaudit's default: the claim states no threat model")
"""The threat model a defense written elsewhere is judged under when its claim states an ε but no
`threat`: honest-but-curious agents, the weakest adversary a decentralized claim is usually stated
against. It is the conservative reading for the claim: an active attack (one that sends crafted
messages) is then a finding outside the claim's threat model, never a refutation of a claim whose
author may not have meant to cover it. The claim carries it as an assumption (`ASSUMED_THREAT`), and
`check` and `run` warn of it (`threat_warning`)."""

ASSUMED_THREAT = ("the claim states no threat model: privaudit judges it as stated against honest-but-curious agents, "
                  "so an active attack on it is a finding, never a refutation; state yours in the Claim: "
                  "threat=ClaimThreat('any adversary', 'your paper's words') (privaudit.accounting.ClaimThreat)")
"""The assumption a claim given `DEFAULT_THREAT` carries, in the words `claims` prints."""


def threat_warning(claim: Claim) -> str | None:
    """The one line saying that `claim` is judged under `DEFAULT_THREAT` because it states no threat
    model, and how to state one; None when it states its own."""
    if claim.threat != DEFAULT_THREAT:
        return None
    return f"defense '{claim.defense}': {ASSUMED_THREAT}"


def relation_warning(claim: Claim) -> str | None:
    """The one line saying that `claim` is audited under `DEFAULT_NEIGHBOURS` because it states no
    relation, and how to state one; None when it states its own."""
    if claim.neighbours != DEFAULT_NEIGHBOURS:
        return None
    return f"defense '{claim.defense}': {ASSUMED_RELATION}"


def checked_claim(defense: Defense, rounds: int) -> Claim:
    """`defense.claim(rounds)`, once it is a usable Claim (`Claim.problem`: no ε below 0 or NaN,
    no δ outside [0, 1]); ValueError naming what is wrong. A defense written elsewhere whose claim
    raises anything is reported the same way (its code is not ours to trace); a shipped one's
    exception is a bug of privaudit and propagates, as do arithmetic errors, which callers name.
    A claim written elsewhere that states an ε and no neighbouring relation gets
    `DEFAULT_NEIGHBOURS`, so no audit of it reads as "no privacy claimed" (`relation_warning`); one
    that states no threat model gets `DEFAULT_THREAT` (`threat_warning`)."""
    try:
        claim = defense.claim(rounds)
    except (OverflowError, ZeroDivisionError, FloatingPointError):
        raise
    except Exception as error:  # noqa: BLE001 - see the docstring
        if defense.name in SHIPPED:
            raise
        raise ValueError(f"the claim of defense '{defense.name}' ({type(defense).__name__}.claim) raised "
                         f"{type(error).__name__}: {error}") from None
    if not isinstance(claim, Claim):
        raise ValueError(f"the claim of defense '{defense.name}' is a {type(claim).__name__}, not a "
                         f"privaudit.accounting.Claim ({type(defense).__name__}.claim must return one)")
    problem = claim.problem()
    if problem:
        raise ValueError(f"the claim of defense '{defense.name}' is unusable: {problem}")
    if claim.eps_claimed is None or defense.name in SHIPPED:
        return claim
    if claim.neighbours is None:
        claim = dataclasses.replace(claim, neighbours=DEFAULT_NEIGHBOURS,
                                    assumptions=(*claim.assumptions, ASSUMED_RELATION))
    if claim.threat is None:
        claim = dataclasses.replace(claim, threat=DEFAULT_THREAT, assumptions=(*claim.assumptions, ASSUMED_THREAT))
    return claim


_SOURCES: weakref.WeakKeyDictionary[ModuleType, str] = weakref.WeakKeyDictionary()
"""The digest of the bytes each module was loaded from, recorded when privaudit first hashes it
(right after `resolve` imports it): what the module in memory runs, even once its file is edited."""


def _file_digest(path: str) -> str | None:
    """The SHA-256 of a file's bytes (16 hex digits, as a cell id), None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return None


def source_digest(name: str) -> str | None:
    """The digest of the source the imported module `name` runs; None when it is not imported or
    has no source file (a built-in or compiled module)."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if module is None or not isinstance(path, str):
        return None
    if module not in _SOURCES:
        digest = _file_digest(path)
        if digest is None:
            return None
        _SOURCES[module] = digest
    return _SOURCES[module]


def plugin_code(cls: type[Defense], imports: Sequence[str] = (), others: Sequence[str] = ()) -> dict[str, str]:
    """The code written outside privaudit that a run's cells run, as module → digest of its source
    (`source_digest`): the defense class's module unless privaudit ships it, the modules `others`
    (a model factory's), and, when either is there, every module of `[campaign] imports` this
    process has imported (a view module beside the class). Empty for a shipped defense on a shipped
    model, whose cells' ids therefore never change with this. Each module counts its own file
    only: a module it imports in turn counts when the campaign lists it too."""
    own = set(others) | ({cls.__module__} if cls.name not in SHIPPED else set())
    if not own:
        return {}
    modules = sorted(own | set(imports))
    return {name: digest for name in modules if (digest := source_digest(name)) is not None}


def _reload_edited(names: Sequence[str]) -> None:
    """Import anew each of the modules `names` that this process imported and whose file has
    changed since, in the order given (the campaign's imports, then the defense's module), so
    a campaign named again after an edit runs the edited code; ValueError in one line when the
    edited module fails to import."""
    for name in dict.fromkeys(names):
        module = sys.modules.get(name)
        recorded = None if module is None else _SOURCES.get(module)
        path = getattr(module, "__file__", None)
        if recorded is None or not isinstance(path, str) or _file_digest(path) == recorded:
            continue
        importlib.invalidate_caches()
        try:
            importlib.reload(module)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of user code is reported on one line
            raise ValueError(f"importing the edited module '{name}' again failed: {type(error).__name__}: "
                             f"{error}") from None
        del _SOURCES[module]
        source_digest(name)


def origin(cls: type[Defense]) -> str:
    """Where `cls` is imported from, as an import path `module:Class`."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _checked(found: object, path: str) -> type[Defense]:
    """`found`, loaded from `path`, once it is checked to be a usable defense class whose name
    no other class holds; ValueError naming the first thing wrong."""
    if not (isinstance(found, type) and issubclass(found, Defense)):
        what = ("a class that does not derive from privaudit.defenses.base.Defense" if isinstance(found, type)
                else f"a {type(found).__name__}")
        raise ValueError(f"'{path}' is not a Defense subclass (it is {what})")
    if inspect.isabstract(found):
        raise ValueError(f"'{path}' is abstract: implement {', '.join(sorted(found.__abstractmethods__))}")
    name = getattr(found, "name", None)
    if not isinstance(name, str) or not name or ":" in name or name != name.strip():
        raise ValueError(f"'{path}' needs a class attribute `name`: a non-empty string without ':' "
                         f"(got {name!r})")
    if not isinstance(getattr(found, "title", None), str):
        raise ValueError(f"'{path}' needs a class attribute `title`: a string the report shows")
    params = getattr(found, "Params", None)
    if not (isinstance(params, type) and issubclass(params, DefenseParams)):
        raise ValueError(f"'{path}' needs a class attribute `Params`: a subclass of "
                         "privaudit.defenses.base.DefenseParams (its hyperparameters)")
    taken = DEFENSES.get(name)
    if taken is not None and origin(taken) != origin(found):
        raise ValueError(f"'{path}' is named '{name}', which {origin(taken)} already is: give it another name")
    return found


def _register(found: type[Defense]) -> type[Defense]:
    DEFENSES[found.name] = found
    return found


def load_attribute(path: str, where: str = "") -> object:
    """The object at the import path `module:attribute` (the attribute may be dotted); `where`
    prefixes the error. No consent is asked here: callers check it first (`load_path`, a campaign's
    validated data loader)."""
    module_name, _, attribute = (part.strip() for part in path.partition(":"))
    if not module_name or not attribute or ":" in attribute:
        raise ValueError(f"{where}'{path}' is not an import path 'package.module:Class'")
    found: object = _import(module_name, where)
    source_digest(module_name)
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(f"{where}module '{module_name}' has no attribute '{attribute}'")
        found = getattr(found, part)
    return found


def _import(module: str, where: str) -> ModuleType:
    """Import `module`; when neither it nor its package is on `sys.path`, try again with the
    current directory appended (a console script's `sys.path` does not hold it)."""
    try:
        return _import_once(module, where)
    except ModuleNotFoundError as error:
        here = os.getcwd()
        if here in sys.path or "" in sys.path:
            raise ValueError(f"{where}cannot import module '{module}' ({error}{_shadowed(module)})") from None
    sys.path.append(here)
    importlib.invalidate_caches()
    try:
        return _import_once(module, where)
    except (ModuleNotFoundError, ValueError) as error:
        sys.path.remove(here)
        if isinstance(error, ValueError):
            raise
        raise ValueError(f"{where}cannot import module '{module}' ({error}; searched sys.path and the current "
                         f"directory{_shadowed(module)})") from None


def _shadowed(module: str) -> str:
    """Where the top-level package of `module` was found, when it was but lacks the rest: another
    distribution's package of the same name (Opacus installs a top-level `examples`) shadows the
    user's."""
    top = module.partition(".")[0]
    found = sys.modules.get(top)
    origin = getattr(found, "__file__", None)
    if top == module or origin is None:
        return ""
    return f"; package '{top}' was found at {os.path.dirname(origin)}, which another installed package may own"


def _import_once(module: str, where: str) -> ModuleType:
    """`importlib.import_module`; ModuleNotFoundError when `module` or its package is missing,
    anything else the module raises (a missing dependency, a syntax error) a one-line ValueError:
    the user's module is not ours to trace."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and (module == error.name or module.startswith(error.name + ".")):
            raise
        raise ValueError(f"{where}importing module '{module}' failed: {type(error).__name__}: {error}") from None
    except Exception as error:  # noqa: BLE001 - any failure of user code is reported on one line
        raise ValueError(f"{where}importing module '{module}' failed: {type(error).__name__}: {error}") from None
    except SystemExit as error:
        raise ValueError(f"{where}importing module '{module}' failed: it called sys.exit({error.code!r})") from None


def _entry_point(name: str, group: str = ENTRY_POINTS) -> metadata.EntryPoint | None:
    return next(iter(metadata.entry_points(group=group, name=name)), None)


def _entry_point_names() -> list[str]:
    return [entry.name for entry in metadata.entry_points(group=ENTRY_POINTS)]
