"""The package as a user installs it: the wheel in site-packages (never this
source tree), typed, documented, with its metadata."""

from __future__ import annotations

import inspect
from importlib.metadata import metadata, requires
from pathlib import Path

import dagnats_leases

SOURCE = Path(__file__).parents[1] / "src"


def test_the_tests_import_the_installed_package_not_the_source_tree() -> None:
    installed = Path(dagnats_leases.__file__).resolve()
    assert "site-packages" in installed.parts
    assert SOURCE.resolve() not in installed.parents


def test_the_installed_package_is_typed() -> None:
    assert (Path(dagnats_leases.__file__).parent / "py.typed").is_file()


def test_the_metadata_names_the_distribution_its_license_and_a_dependency_floor() -> None:
    meta = metadata("dagnats-leases")
    assert meta["Name"] == "dagnats-leases"
    assert meta["Version"] == dagnats_leases.__version__
    assert (meta["License-Expression"] or meta["License"]) == "Apache-2.0"
    assert meta["Requires-Python"] == ">=3.11"
    assert "nats-py>=2.9" in (requires("dagnats-leases") or [])


def test_every_name_the_issue_binds_is_importable_from_the_package() -> None:
    for name in (
        "LeaseClient",
        "LeaseKeeper",
        "LeaseError",
        "serve_inbox",
        "FenceGate",
        "StaleFence",
        "Grant",
        "Lease",
        "Released",
        "LeaseList",
        "FreeKey",
        "InboxRequest",
        "Ownership",
    ):
        assert hasattr(dagnats_leases, name), name
    assert set(dagnats_leases.__all__) <= set(dir(dagnats_leases))


def test_every_public_class_function_and_method_has_a_docstring() -> None:
    missing = []
    for name in dagnats_leases.__all__:
        obj = getattr(dagnats_leases, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                    continue
                if not inspect.getdoc(member):
                    missing.append(f"{name}.{attr}")
    assert missing == []
