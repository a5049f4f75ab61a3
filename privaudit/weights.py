"""The LPIPS backbone: where its weights live, what a weights file must hold, and how one gets there.

LPIPS (Zhang et al. 2018) compares images through an ImageNet network's feature maps. privaudit
scores its AlexNet variant: the lpips package ships the linear layers on top, but the AlexNet trunk
needs torchvision's ImageNet weights, which no dependency ships and no run fetches (no network at
run time is the normal case). Scoring reads one of two files in one folder (`directory()`):

* torchvision's published weights under their published name (`alexnet-owt-7be5be79.pth`: torch
  hub's convention puts a prefix of the file's SHA-256 in the name, and the file must match it).
  The folder is torch hub's checkpoints folder, so weights torchvision already downloaded are used
  as they are; `privaudit weights lpips` downloads them there once, when the machine is online.
* a file the user installs with `privaudit weights lpips --from FILE` whose hash is not the
  published one (weights converted from another format, a stand-in in a test). It is kept as
  `USER_FILE`, and every score made with it says so with the file's SHA-256: LPIPS with other
  weights is not the published metric.

The published file wins when both are there. `PRIVAUDIT_WEIGHTS` names another folder (a disk the
nodes of a cluster share). A file is read with `torch.load(weights_only=True)`, which builds tensors
and never runs code a pickle names, and must hold AlexNet's feature layers with their shapes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import torch
from torch import Tensor

from privaudit.errors import ConfigError, PrivauditError

VARIABLE = "PRIVAUDIT_WEIGHTS"
USER_FILE = "privaudit-lpips-alexnet.pth"
"""The name a user's backbone file is installed under, beside the published one."""

ALEXNET_FEATURES: dict[str, tuple[int, ...]] = {
    "features.0.weight": (64, 3, 11, 11), "features.0.bias": (64,),
    "features.3.weight": (192, 64, 5, 5), "features.3.bias": (192,),
    "features.6.weight": (384, 192, 3, 3), "features.6.bias": (384,),
    "features.8.weight": (256, 384, 3, 3), "features.8.bias": (256,),
    "features.10.weight": (256, 256, 3, 3), "features.10.bias": (256,),
}
"""The tensors of torchvision's `alexnet().features` and their shapes: all lpips' AlexNet reads, and
the only shapes it takes (its linear layers expect 64, 192, 384, 256 and 256 channels)."""

_HASH_IN_NAME = re.compile(r"-([a-f0-9]+)\.")
_CHUNK = 1 << 20
T = TypeVar("T")


@dataclass(frozen=True)
class Backbone:
    """A backbone file scoring can use: where it is, its SHA-256, and whether that is the hash
    torchvision publishes for its ImageNet AlexNet weights."""

    path: Path
    sha256: str
    published: bool

    def record(self) -> dict[str, Any]:
        """The row's `lpips_backbone`: what LPIPS was computed with."""
        return {"published": self.published, "sha256": self.sha256, "file": self.path.name}

    def status(self) -> str:
        """The row's `lpips_status` for a score made with this file: plain "ok" for the published
        weights, else what the file is and that it is not the published metric."""
        if self.published:
            return "ok"
        return (f"ok (backbone: user file sha256 {self.sha256[:8]}…, not torchvision's published ImageNet "
                "weights: not the published LPIPS)")


def published_url() -> str:
    """Where torchvision downloads its ImageNet AlexNet weights (from the installed torchvision, so
    the file follows whatever its `alexnet` would fetch)."""
    from torchvision.models import AlexNet_Weights

    return AlexNet_Weights.IMAGENET1K_V1.url


def directory() -> Path:
    """The folder backbone files are read from and installed to: `PRIVAUDIT_WEIGHTS`, else torch
    hub's checkpoints folder; a ConfigError naming the variable when it names a file."""
    text = os.environ.get(VARIABLE, "").strip()
    if not text:
        return Path(torch.hub.get_dir()) / "checkpoints"
    folder = Path(text).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{VARIABLE}={text!r} is not a folder (it names where backbone weights are kept)")
    return folder


def published_path() -> Path:
    """Where torchvision's published AlexNet weights are looked for, under their published name."""
    return directory() / Path(urlparse(published_url()).path).name


def user_path() -> Path:
    """Where a backbone file the user installed that is not the published one is kept."""
    return directory() / USER_FILE


def scoring_path() -> Path | None:
    """The file LPIPS is scored with: the published one when present, else the user's, else None."""
    return next((path for path in (published_path(), user_path()) if path.is_file()), None)


def sha256(path: Path) -> str:
    """The file's SHA-256, read in chunks (the published file is 244 MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def published_prefix() -> str:
    """The SHA-256 prefix the published file's name carries."""
    return _HASH_IN_NAME.search(published_path().name).group(1)


def read(path: Path) -> tuple[dict[str, Tensor], Backbone]:
    """AlexNet's feature tensors from `path` and what the file is; a PrivauditError naming what is
    wrong when it is not a weights file torch reads safely, lacks a layer or has a wrong shape, or
    carries the published name without the published hash."""
    digest = sha256(path)
    published = digest.startswith(published_prefix())
    if path.name == published_path().name and not published:
        raise PrivauditError(f"{path} is not the published AlexNet weights file (SHA-256 {digest[:8]}…, its name "
                             f"says {published_prefix()}…)")
    return _features(_load(path), path), Backbone(path, digest, published)


def _load(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch.load raises many kinds of error on a file that is not its own
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PrivauditError(f"{path} is not a weights file torch reads without running code "
                             f"(torch.load weights_only): {first}") from None


def _features(state: Any, path: Path) -> dict[str, Tensor]:
    """The feature tensors of a state dict (of `alexnet().features` prefixed `features.`, or of a
    whole torchvision alexnet), checked against `ALEXNET_FEATURES`."""
    if not isinstance(state, dict):
        raise PrivauditError(f"{path} holds {type(state).__name__}, not a state dict of AlexNet's feature layers")
    missing = [key for key in ALEXNET_FEATURES if key not in state]
    if missing:
        raise PrivauditError(f"{path} lacks {', '.join(missing)} (AlexNet's feature layers: features.0, 3, 6, 8 "
                             "and 10, weight and bias)")
    for key, shape in ALEXNET_FEATURES.items():
        tensor = state[key]
        if not isinstance(tensor, Tensor) or not tensor.is_floating_point():
            raise PrivauditError(f"{path}: {key} is not a floating-point tensor")
        if tuple(tensor.shape) != shape:
            raise PrivauditError(f"{path}: {key} has shape {tuple(tensor.shape)}, AlexNet's is {shape}")
        if not bool(torch.isfinite(tensor).all()):
            raise PrivauditError(f"{path}: {key} holds values that are not finite")
    return {key: state[key] for key in ALEXNET_FEATURES}


def install_from(source: str | Path) -> Backbone:
    """Check the user's file and copy it, byte for byte, where scoring finds it: under the published
    name when its hash is the published one, else as `USER_FILE` (replacing an earlier one)."""
    source = Path(source).expanduser()
    if not source.is_file():
        raise PrivauditError(f"--from {source}: no such file")
    _, found = read(source)
    target = published_path() if found.published else user_path()
    _place(lambda staging: shutil.copyfile(source, staging), target)
    return Backbone(target, found.sha256, found.published)


def download(fetch: Callable[[str, str], None] | None = None) -> tuple[Backbone, bool]:
    """torchvision's published weights in `directory()`: the file already there when it checks,
    else fetched once (`fetch(url, path)`, torch hub's `download_url_to_file` by default) and
    checked before it is put in place. Returns the backbone and whether it was downloaded now; a
    PrivauditError saying the download cannot be reached, and what to do instead, when offline."""
    target = published_path()
    if target.is_file():
        try:
            return read(target)[1], False
        except PrivauditError:
            pass  # a damaged or foreign file under the published name: fetched again below
    url = published_url()
    fetch = fetch or (lambda address, path: torch.hub.download_url_to_file(address, path, progress=True))

    def fetched(staging: Path) -> Backbone:
        try:
            fetch(url, str(staging))
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", None) or error.strerror or error
            raise PrivauditError(f"cannot reach {url} ({reason}): this machine seems offline; fetch that file "
                                 "elsewhere and install it with: privaudit weights lpips --from FILE") from None
        found = read(staging)[1]
        if not found.published:
            raise PrivauditError(f"the file downloaded from {url} has SHA-256 {found.sha256[:8]}…, not the "
                                 f"published {published_prefix()}…; nothing was installed")
        return found

    return Backbone(target, _place(fetched, target).sha256, True), True


def _place(write: Callable[[Path], T], target: Path) -> T:
    """Write `target` through a staging file beside it, moved into place only once `write` has
    finished without error: scoring never sees half a file, and a failure leaves nothing behind.
    Returns what `write` returns."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=".partial-", suffix=".pth")
    os.close(handle)
    staging = Path(name)
    try:
        written = write(staging)
        os.replace(staging, target)
        return written
    finally:
        staging.unlink(missing_ok=True)


def installed() -> Iterator[tuple[str, Path, bool]]:
    """What `privaudit weights` lists: (what the file is, where it goes, whether it is there)."""
    yield "torchvision's published ImageNet AlexNet weights", published_path(), published_path().is_file()
    yield "a file you installed (--from FILE, not the published weights)", user_path(), user_path().is_file()
