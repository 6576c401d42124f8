"""The model's shared vocabulary, in process: job states and the translation of a backend's native
states into them (model/states.py), what a cloud's instance types and images offer a job's VM
requirements and which type it gets (model/vmtypes.py), and how values are shown in errors
(model/text.py)."""

from __future__ import annotations

import logging

import pytest

from isthmus.model.job import VmRequirements
from isthmus.model.states import TERMINAL, TERMINAL_NAMES, JobState, translate
from isthmus.model.text import show_value
from isthmus.model.vmtypes import (
    InstanceType,
    VmImage,
    cheapest_type,
    describe,
    image_index,
    is_empty,
    site_misfit,
    type_misfit,
    vms_needed,
)

NATIVE = {"PD": JobState.QUEUED, "R": JobState.RUNNING, "CD": JobState.COMPLETED, "TO": JobState.TIMEOUT}


def test_terminal_states_are_the_ones_a_job_never_leaves() -> None:
    assert {s for s in JobState if s.terminal} == set(TERMINAL)
    assert {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.LOST,
        JobState.REJECTED,
    } == TERMINAL
    assert not any(s.terminal for s in (JobState.QUEUED, JobState.STARTING, JobState.RUNNING, JobState.UNKNOWN))
    # the words stored in the database, sorted for SQL IN clauses
    assert TERMINAL_NAMES == ("cancelled", "completed", "failed", "lost", "rejected", "timeout")
    assert all(s.value == s.value.lower() and s == s.value for s in JobState)


def test_a_native_state_is_translated_through_its_table_and_an_unknown_one_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert translate(NATIVE, "TO", system="Batch") is JobState.TIMEOUT
    assert translate(NATIVE, "CD", system="Batch") is JobState.COMPLETED
    with caplog.at_level(logging.WARNING, logger="isthmus.states"):
        assert translate(NATIVE, "WEIRD", system="Batch") is JobState.UNKNOWN
    assert "Batch reported an unknown job state 'WEIRD'" in caplog.text
    assert translate(NATIVE, "td", system="Batch") is JobState.UNKNOWN  # the table's spelling only


SMALL = InstanceType("small", cores=1, price_per_hour=0.10, memory_mb=2048, disk_gb=10, arch="x86_64")
LARGE = InstanceType("large", cores=4, price_per_hour=0.30, memory_mb=16384, disk_gb=100, arch="x86_64")
ARM = InstanceType("arm", cores=4, price_per_hour=0.20, memory_mb=8192, arch="aarch64", provider_size="a1.xlarge")
TYPES = (SMALL, LARGE, ARM)
IMAGES = (VmImage("ubuntu", provider_id="ami-1", arch="x86_64"), VmImage("ubuntu-arm", arch="aarch64"))


def test_a_type_fits_a_requirement_only_when_every_figure_is_known_and_enough() -> None:
    assert type_misfit(VmRequirements(), SMALL) == ""
    assert type_misfit(VmRequirements(cores=2), SMALL) == "type small has 1 cores, not 2"
    assert type_misfit(VmRequirements(memory_mb=4096), SMALL) == "type small has 2048 MB of memory, not 4096 MB"
    assert type_misfit(VmRequirements(cpu_arch="aarch64"), LARGE) == "type large is x86_64, not aarch64"
    assert type_misfit(VmRequirements(vm_type="large"), SMALL) == "type small is not large"
    # an unknown figure never matches a requirement on it
    unknown = InstanceType("default", cores=2)
    assert type_misfit(VmRequirements(storage_gb=1), unknown) == "type default has an unknown amount of disk, not 1 GB"
    assert type_misfit(VmRequirements(cpu_arch="x86_64"), unknown).endswith("of unknown architecture, not x86_64")
    assert ARM.size_id == "a1.xlarge" and SMALL.size_id == "small"


def test_the_cheapest_type_counts_the_vms_a_job_spans() -> None:
    # 1 processor: one small VM (0.10) beats one arm VM (0.20)
    assert cheapest_type(None, TYPES, IMAGES, size=1) == (0, 0)
    # 4 processors: four small VMs cost 0.40, one arm VM 0.20, and it boots the arm image
    assert cheapest_type(None, TYPES, IMAGES, size=4) == (2, 1)
    # an x86_64 requirement leaves small (0.40 for 4) and large (0.30)
    assert cheapest_type(VmRequirements(cpu_arch="x86_64"), TYPES, IMAGES, size=4) == (1, 0)
    # ties: fewer VMs first (two at 0.10 against one at 0.20), then the site's order
    twin = InstanceType("twin", cores=2, price_per_hour=0.20)
    assert cheapest_type(None, (SMALL, twin), (), size=2) == (1, 0)
    assert cheapest_type(None, (twin, InstanceType("twin2", cores=2, price_per_hour=0.20)), (), size=2) == (0, 0)
    # nothing serves it
    assert cheapest_type(VmRequirements(memory_mb=10**6), TYPES, IMAGES, size=1) == (-1, -1)
    assert cheapest_type(VmRequirements(image="ubuntu-arm", cpu_arch="x86_64"), TYPES, IMAGES, size=1) == (-1, -1)
    assert vms_needed(5, LARGE) == 2 and vms_needed(1, LARGE) == 1


def test_the_image_a_vm_boots_is_the_one_named_or_the_first_that_suits_its_architecture() -> None:
    assert image_index(VmRequirements(image="ami-1"), IMAGES, LARGE) == 0  # named by provider id
    assert image_index(VmRequirements(image="ubuntu"), IMAGES, ARM) == -1  # named, but for x86_64
    assert image_index(VmRequirements(), IMAGES, ARM) == 1
    assert image_index(VmRequirements(), (), ARM) == 0  # none declared: the provider's default


def test_a_site_that_can_never_serve_a_job_says_why() -> None:
    nets = ("private",)
    assert site_misfit(VmRequirements(cores=4), TYPES, IMAGES, nets) == ""
    assert site_misfit(VmRequirements(network="public"), TYPES, IMAGES, nets) == "no network public (networks: private)"
    assert site_misfit(VmRequirements(image="centos"), TYPES, IMAGES, nets) == (
        "no image centos (images: ubuntu, ubuntu-arm)"
    )
    assert site_misfit(VmRequirements(cores=8), TYPES, IMAGES, nets) == (
        "type small has 1 cores, not 8; type large has 4 cores, not 8; type arm has 4 cores, not 8"
    )
    assert site_misfit(VmRequirements(image="ubuntu-arm", memory_mb=16000), TYPES, IMAGES, nets) == (
        "image ubuntu-arm suits no type that fits"
    )


def test_requirements_and_values_are_shown_as_users_write_them() -> None:
    req = VmRequirements(vm_type="big", cpu_arch="x86_64", memory_mb=2048, storage_gb=2.5)
    assert describe(req) == "type=big, arch=x86_64, memory=2048 MB, storage=2.5 GB"
    assert describe(VmRequirements()) == "none"
    assert is_empty(None) and is_empty(VmRequirements()) and not is_empty(req)
    assert show_value(True) == "true" and show_value(None) == "null"
    assert show_value('a"b') == '"a\\"b"'
    assert show_value([1, 2]) == "a list of 2 items" and show_value([1]) == "a list of 1 item"
    assert show_value({"x": 1}) == "a table {x}" and show_value({}) == "a table"
    assert show_value("x" * 100, limit=10) == '"' + "x" * 8 + "…"
