"""Datasets the attacks run on, and the ways they are split among the agents of a decentralized run.

Three datasets ship with the installed packages and load with no network (`digits`, `lfw`,
`photos`), so every test and demo runs offline; `mnist`, `cifar10` and `cifar100` are read through
torchvision from a folder the user provides. Every dataset comes back normalised with a fixed,
documented per-channel map, so an attack can turn a reconstruction back into [0, 1] pixels and
score it against the private original.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from privaudit.errors import DataError

DATASETS: tuple[str, ...] = ("digits", "lfw", "photos", "mnist", "cifar10", "cifar100")
PARTITIONS: tuple[str, ...] = ("iid", "dirichlet", "shards")


@dataclass(frozen=True)
class Normalisation:
    """Per-channel affine map from raw pixels in [0, 1] to model inputs: (x - mean) / std.

    Kept with the data so that attacks can undo it: reconstruction quality is measured on the
    pixels a person would see, and PSNR/SSIM need the range the normalised values span.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.mean) != len(self.std) or not self.mean:
            raise ValueError(f"normalisation needs one mean and one std per channel, got {self}")
        if min(self.std) <= 0:
            raise ValueError(f"normalisation std must be positive, got {self.std}")

    def _affine(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and std shaped [C, 1, 1] to broadcast over [..., C, H, W] on x's device and dtype."""
        if x.dim() < 3 or x.shape[-3] != len(self.mean):
            raise ValueError(
                f"expected [..., {len(self.mean)}, H, W] pixels, got shape {tuple(x.shape)}"
            )
        mean = torch.tensor(self.mean, dtype=x.dtype, device=x.device).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype, device=x.device).view(-1, 1, 1)
        return mean, std

    def normalise(self, x: Tensor) -> Tensor:
        """Map [..., C, H, W] pixels in [0, 1] to model inputs."""
        mean, std = self._affine(x)
        return (x - mean) / std

    def denormalise(self, x: Tensor) -> Tensor:
        """Map model inputs [..., C, H, W] back to pixels in [0, 1] (the inverse of `normalise`)."""
        mean, std = self._affine(x)
        return x * std + mean

    def data_range(self) -> tuple[float, float]:
        """(min, max) that normalised pixels can take over all channels, the range PSNR/SSIM need."""
        low = min((0.0 - m) / s for m, s in zip(self.mean, self.std))
        high = max((1.0 - m) / s for m, s in zip(self.mean, self.std))
        return low, high


@dataclass(frozen=True, eq=False)
class Dataset:
    """A normalised train/test split; tensors stay out of repr and equality because they are large.

    `task` is "classification" (integer labels) or "regression" (float targets, `num_classes`
    is then the target size). Synthetic problems (`privaudit/synthetic.py`) also carry the
    parameter the agents should find (`truth`) and which agent generated each training sample
    (`owners`), since their data are drawn per agent rather than partitioned from a pool.
    """

    name: str
    x_train: Tensor = field(repr=False)
    y_train: Tensor = field(repr=False)
    x_test: Tensor = field(repr=False)
    y_test: Tensor = field(repr=False)
    num_classes: int
    normalisation: Normalisation
    class_names: tuple[str, ...]
    task: str = "classification"
    truth: Tensor | None = field(default=None, repr=False)
    owners: np.ndarray | None = field(default=None, repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one input ((C, H, W) for images), what a model's first layer is built for."""
        return tuple(int(size) for size in self.x_train.shape[1:])

    def to(self, device: torch.device) -> Dataset:
        """The same split with its tensors on `device`."""
        return dataclasses.replace(
            self, x_train=self.x_train.to(device), y_train=self.y_train.to(device), x_test=self.x_test.to(device),
            y_test=self.y_test.to(device), truth=None if self.truth is None else self.truth.to(device))


# Offline sets are centred on mid-grey so that normalised pixels span [-1, 1]; MNIST and CIFAR use
# the per-channel statistics of their training sets, as the models in the literature do.
_HALF = Normalisation(mean=(0.5,), std=(0.5,))
_NORMALISATIONS: dict[str, Normalisation] = {
    "digits": _HALF,
    "lfw": _HALF,
    "photos": Normalisation(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)),
    "mnist": Normalisation(mean=(0.1307,), std=(0.3081,)),
    "cifar10": Normalisation(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616)),
    "cifar100": Normalisation(mean=(0.5071, 0.4865, 0.4409), std=(0.2673, 0.2564, 0.2762)),
}

_DIGIT_NAMES = tuple(str(d) for d in range(10))

# Photographs bundled inside the scikit-image wheel (skimage/data), name -> file. Grayscale ones
# (camera, coins) are repeated over three channels.
_PHOTOS: dict[str, str] = {
    "astronaut": "astronaut.png",
    "camera": "camera.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "rocket": "rocket.jpg",
    "coins": "coins.png",
}
_PHOTO_SHORT_SIDE = 256
_CROP = 32
_FLAT_CROP_STD = 0.02

# Files torchvision reads for each dataset, relative to data_root.
_TORCHVISION_FILES: dict[str, tuple[str, ...]] = {
    "mnist": (
        "MNIST/raw/train-images-idx3-ubyte",
        "MNIST/raw/train-labels-idx1-ubyte",
        "MNIST/raw/t10k-images-idx3-ubyte",
        "MNIST/raw/t10k-labels-idx1-ubyte",
    ),
    "cifar10": tuple(f"cifar-10-batches-py/{f}" for f in (
        "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
        "test_batch", "batches.meta",
    )),
    "cifar100": ("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
}


@dataclass(frozen=True)
class _Raw:
    """Pixels before normalisation, [n, C, H, W]: float32 in [0, 1] or uint8 in [0, 255]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]


_DOWNLOADS_REFUSED = False


@contextlib.contextmanager
def downloads_refused() -> Iterator[None]:
    """Within the block a dataset asked for with `download = true` is read from its folder only:
    `privaudit check` creates no folder and reaches no network."""
    global _DOWNLOADS_REFUSED
    before, _DOWNLOADS_REFUSED = _DOWNLOADS_REFUSED, True
    try:
        yield
    finally:
        _DOWNLOADS_REFUSED = before


def load_dataset(
    name: str,
    *,
    data_root: str | Path | None = None,
    download: bool = False,
    seed: int = 0,
    test_fraction: float = 0.2,
    max_train: int | None = None,
) -> Dataset:
    """Load a dataset normalised and split into train and test.

    The offline sets (digits, lfw, photos) have no official split, so they get a stratified split
    drawn from `seed` with `test_fraction` of each class held out; mnist, cifar10 and cifar100 keep
    their standard split and need `data_root`. `max_train` keeps a random subset of the training
    set, drawn from `seed`, for quick runs. Raw pixels are cached per process, so loading again is
    cheap.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r} (choose from {', '.join(DATASETS)})")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    if max_train is not None and max_train < 1:
        raise ValueError(f"max_train must be at least 1, got {max_train}")

    if name in _TORCHVISION_FILES:
        if data_root is None:
            expected = ", ".join(_TORCHVISION_FILES[name])
            raise DataError(
                f"dataset {name!r}: no data_root given (expected {expected} under it); "
                "set data_root to the folder holding them"
            )
        root = _root(name, data_root)
        try:
            raw = _torchvision_raw(name, root, download and not _DOWNLOADS_REFUSED)
        except DataError:
            if download and _DOWNLOADS_REFUSED:
                raise DataError(f"dataset {name!r}: no data under {root} yet: a run downloads it (download = true); "
                                "privaudit check reads only what is there") from None
            raise
    else:
        raw = _split(name, seed, test_fraction)

    train = np.arange(len(raw.y_train))
    if max_train is not None and max_train < len(train):
        train = np.sort(np.random.default_rng(seed).choice(len(train), size=max_train, replace=False))

    normalisation = _NORMALISATIONS[name]
    return Dataset(
        name=name,
        x_train=normalisation.normalise(_pixels(raw.x_train[train])),
        y_train=torch.from_numpy(raw.y_train[train].astype(np.int64)),
        x_test=normalisation.normalise(_pixels(raw.x_test)),
        y_test=torch.from_numpy(raw.y_test.astype(np.int64)),
        num_classes=len(raw.class_names),
        normalisation=normalisation,
        class_names=raw.class_names,
    )


def _root(name: str, data_root: str | Path) -> str:
    """`data_root` as an absolute path, `~` and `~user` expanded; a DataError naming it when it
    names a user this machine does not have (`~nobody-here/x`) or no home is known."""
    try:
        return str(Path(data_root).expanduser().resolve())
    except RuntimeError as error:
        raise DataError(f"dataset {name!r}: data_root {str(data_root)!r} starts with a '~' this machine cannot "
                        f"expand ({error})") from None


def _pixels(x: np.ndarray) -> Tensor:
    """Float32 pixels in [0, 1] from either raw storage type (a fresh copy, never the cache)."""
    tensor = torch.tensor(x)
    return tensor.float().div_(255.0) if x.dtype == np.uint8 else tensor.float()


def _split(name: str, seed: int, test_fraction: float) -> _Raw:
    """Stratified, seeded train/test split of an offline dataset (the whole set is cached)."""
    from sklearn.model_selection import train_test_split

    x, y, class_names = _offline(name)
    train, test = train_test_split(
        np.arange(len(y)), test_size=test_fraction, stratify=y, random_state=seed
    )
    return _Raw(x[train], y[train], x[test], y[test], class_names)


@functools.lru_cache(maxsize=None)
def _offline(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """All images [n, C, H, W] float32 in [0, 1], labels and class names of an offline dataset."""
    if name == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = (digits.images / 16.0).astype(np.float32)[:, None]
        return _frozen(x), _frozen(digits.target.astype(np.int64)), _DIGIT_NAMES
    if name == "lfw":
        faces = _skimage_file("lfw", "lfw_subset.npy", np.load)
        # skimage documents the first 100 images as faces and the last 100 as non-faces.
        y = (np.arange(len(faces)) < len(faces) // 2).astype(np.int64)
        return _frozen(faces.astype(np.float32)[:, None]), _frozen(y), ("non-face", "face")
    return _photo_crops()


def _photo_crops() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """32x32 RGB crops of the photographs bundled with scikit-image, labelled by photograph.

    Each photograph is resized (anti-aliased) so its shorter side is 256 px, then cut into the
    non-overlapping grid of 32x32 crops from its top-left corner; leftover border pixels are
    dropped. Crops that do not overlap cannot leak one another into the test split. Near-uniform
    crops (pixel std below 0.02, e.g. clear sky) are discarded because any attack reconstructs
    them trivially and they would inflate its scores. This gives 480 crops over 6 classes.
    """
    from skimage.color import gray2rgb
    from skimage.io import imread
    from skimage.transform import resize
    from skimage.util import img_as_float32

    crops, labels = [], []
    for label, filename in enumerate(_PHOTOS.values()):
        image = img_as_float32(_skimage_file("photos", filename, imread))
        if image.ndim == 2:
            image = gray2rgb(image)
        scale = _PHOTO_SHORT_SIDE / min(image.shape[:2])
        height, width = round(image.shape[0] * scale), round(image.shape[1] * scale)
        image = resize(image, (height, width), anti_aliasing=True).astype(np.float32)
        for top in range(0, height - _CROP + 1, _CROP):
            for left in range(0, width - _CROP + 1, _CROP):
                crop = image[top : top + _CROP, left : left + _CROP]
                if crop.std() >= _FLAT_CROP_STD:
                    crops.append(crop.transpose(2, 0, 1))
                    labels.append(label)
    x = np.clip(np.stack(crops), 0.0, 1.0)
    return _frozen(x), _frozen(np.array(labels, dtype=np.int64)), tuple(_PHOTOS)


def _skimage_file(dataset: str, filename: str, reader: Callable[[str], Any]) -> Any:
    """Read a file shipped in scikit-image's data folder, never through its downloader.

    skimage.data's own loaders fall back to a network fetch (and silently skip pytest tests) when
    a file is missing; reading the bundled file directly fails loudly and offline instead.
    """
    from skimage.data import data_dir

    path = Path(data_dir) / filename
    try:
        return reader(str(path))
    except (OSError, ValueError) as err:
        raise DataError(
            f"dataset {dataset!r}: cannot read {filename} under {data_dir} ({err}); "
            "it ships with scikit-image, so reinstall scikit-image"
        ) from err


def _frozen(array: np.ndarray) -> np.ndarray:
    """Mark a cached array read-only so no caller can alter what later loads return."""
    array.flags.writeable = False
    return array


@functools.lru_cache(maxsize=None)
def _torchvision_raw(name: str, root: str, download: bool) -> _Raw:
    """Standard train/test split of mnist, cifar10 or cifar100 read by torchvision from `root`."""
    import torchvision

    cls = {
        "mnist": torchvision.datasets.MNIST,
        "cifar10": torchvision.datasets.CIFAR10,
        "cifar100": torchvision.datasets.CIFAR100,
    }[name]
    expected = ", ".join(_TORCHVISION_FILES[name])
    # torchvision reports missing or corrupt files as RuntimeError, failed downloads as OSError
    # (URLError), and malformed idx files through asserts, TypeError and ValueError.
    try:
        train = cls(root, train=True, download=download)
        test = cls(root, train=False, download=download)
    except (RuntimeError, OSError, AssertionError, TypeError, ValueError) as err:
        if download:
            detail = str(err).splitlines()[0] if str(err) else type(err).__name__
            problem, remedy = f"download into {root} failed ({detail})", "put the files there by hand"
        elif all((Path(root) / f).is_file() for f in _TORCHVISION_FILES[name]):
            problem, remedy = f"files under {root} are unreadable or corrupt", "replace them"
        else:
            problem, remedy = f"no data under {root}", "put the files there or set download = true"
        raise DataError(f"dataset {name!r}: {problem} (expected {expected}); {remedy}") from err

    class_names = _DIGIT_NAMES if name == "mnist" else tuple(train.classes)
    for part in (train, test):
        labels = np.asarray(part.targets)
        outside = labels[(labels < 0) | (labels >= len(class_names))]
        if outside.size:
            raise DataError(f"dataset {name!r}: files under {root} hold label {int(outside[0])} outside the "
                            f"{len(class_names)} classes (expected {expected}); replace them")
    return _Raw(
        x_train=_frozen(_nchw(train.data)),
        y_train=_frozen(np.asarray(train.targets, dtype=np.int64)),
        x_test=_frozen(_nchw(test.data)),
        y_test=_frozen(np.asarray(test.targets, dtype=np.int64)),
        class_names=class_names,
    )


def _nchw(data: Tensor | np.ndarray) -> np.ndarray:
    """uint8 [n, C, H, W] from torchvision's storage: MNIST's [n, H, W] tensor, CIFAR's [n, H, W, C]."""
    array = np.asarray(data, dtype=np.uint8)
    return array[:, None] if array.ndim == 3 else np.ascontiguousarray(array.transpose(0, 3, 1, 2))


def partition(
    labels: np.ndarray,
    n_agents: int,
    kind: str = "iid",
    *,
    seed: int = 0,
    alpha: float = 0.5,
    min_size: int = 1,
    shards_per_agent: int = 2,
) -> list[np.ndarray]:
    """Split sample indices among agents: one sorted int64 index array per agent.

    The arrays cover every index exactly once and each holds at least `min_size` samples.
    `iid` deals a random permutation into near-equal parts; `dirichlet` gives each agent a share
    of every class drawn from Dirichlet(alpha), so small alpha means strong label skew; `shards`
    sorts by label and deals `shards_per_agent` contiguous shards to each agent, the pathological
    non-iid split of McMahan et al. All draws come from numpy's default_rng(seed).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {labels.shape}")
    if kind not in PARTITIONS:
        raise ValueError(f"unknown partition {kind!r} (choose from {', '.join(PARTITIONS)})")
    if not 1 <= n_agents <= len(labels):
        raise ValueError(f"n_agents must be between 1 and the {len(labels)} samples, got {n_agents}")
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1, got {min_size}")
    if min_size * n_agents > len(labels):
        raise ValueError(
            f"min_size {min_size} is impossible: {n_agents} agents share only {len(labels)} samples"
        )
    rng = np.random.default_rng(seed)
    if kind == "iid":
        parts = np.array_split(rng.permutation(len(labels)), n_agents)
    elif kind == "dirichlet":
        parts = _dirichlet(labels, n_agents, rng, alpha, min_size)
    else:
        parts = _shards(labels, n_agents, rng, shards_per_agent)
    smallest = min(len(p) for p in parts)
    if smallest < min_size:
        raise ValueError(
            f"{kind} partition gives an agent only {smallest} samples, fewer than min_size {min_size}"
        )
    return [np.sort(p).astype(np.int64) for p in parts]


_DIRICHLET_TRIES = 100


def _dirichlet(
    labels: np.ndarray, n_agents: int, rng: np.random.Generator, alpha: float, min_size: int
) -> list[np.ndarray]:
    """Per-class Dirichlet shares, redrawn until every agent holds at least min_size samples."""
    if alpha <= 0:
        raise ValueError(f"dirichlet alpha must be positive, got {alpha}")
    by_class = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    for _ in range(_DIRICHLET_TRIES):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_agents)]
        for members in by_class:
            shares = rng.dirichlet(np.full(n_agents, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
            for agent, chunk in enumerate(np.split(rng.permutation(members), cuts)):
                parts[agent].append(chunk)
        merged = [np.concatenate(chunks) for chunks in parts]
        if min(len(p) for p in merged) >= min_size:
            return merged
    raise ValueError(
        f"dirichlet partition: no draw in {_DIRICHLET_TRIES} tries gave all {n_agents} agents "
        f"at least {min_size} samples (alpha {alpha}); raise alpha or lower min_size"
    )


def _shards(
    labels: np.ndarray, n_agents: int, rng: np.random.Generator, shards_per_agent: int
) -> list[np.ndarray]:
    """Label-sorted indices cut into equal shards, shards_per_agent random shards per agent."""
    n_shards = n_agents * shards_per_agent
    if shards_per_agent < 1 or n_shards > len(labels):
        raise ValueError(
            f"shards_per_agent {shards_per_agent} is impossible: {n_agents} agents need "
            f"{n_shards} shards of at least one of the {len(labels)} samples"
        )
    shards = np.array_split(np.argsort(labels, kind="stable"), n_shards)
    order = rng.permutation(n_shards).reshape(n_agents, shards_per_agent)
    return [np.concatenate([shards[s] for s in row]) for row in order]
