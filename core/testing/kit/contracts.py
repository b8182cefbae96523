"""The contracts of a plugin, one check each, run by the conformance kit.

A check raises `ContractViolation` with what was expected and what the plugin did; the first
line of its docstring is the contract, as the kit's report and docs/plugin-reference.md name it.
Checks come in four scopes: the plugin, each kind it declares, each valid example, each
invalid example. A feature plugin (no kind of its own) has its own plugin and example lists
(`FEATURE_CONTRACTS`, `FEATURE_EXAMPLE_CONTRACTS`), checked on its examples of any kind.
Every hook is called through the real engine (`manager.hooks_for`, `plan`)
under the I/O guard.

This module is the list, in the order the kit runs them; the checks live by what they check:
`declared` (the plugin and its kinds), `admitted` (at the API server), `validity` (the
examples themselves), `building` (pods and children), `verdicts` (`compute_status`),
`behaviour` (mistakes met in real runs), `managed` (`spec.managedBy`), `runnable` (what a
real run needs), `meaning` (ranks, world size and addresses, as the kind declares them),
`gangs` and `features` (feature plugins, and the kinds of every plugin's children), all in
`t9kjobs.testing.kit`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from t9kjobs.testing.kit.admitted import crd_is_accepted_by_the_api_server, example_is_admitted
from t9kjobs.testing.kit.behaviour import (
    compute_status_waits_for_restarting_replicas,
    pods_follow_restart_policy,
    pods_use_only_declared_objects,
    status_model_is_filled,
    subdomains_have_headless_services,
    training_container_exists,
    validate_checks_run_mode,
)
from t9kjobs.testing.kit.building import (
    build_pods_is_deterministic,
    children_carry_owner_labels_and_references,
    hooks_do_no_io,
    launch_command_is_list_of_str,
    pods_are_named_by_convention,
)
from t9kjobs.testing.kit.declared import (
    crd_is_structural,
    declares_kinds_and_spec_model,
    has_examples,
    loads_through_entry_point,
)
from t9kjobs.testing.kit.examples import Example
from t9kjobs.testing.kit.features import (
    children_are_of_declared_kinds,
    declares_options_and_child_kinds,
)
from t9kjobs.testing.kit.gangs import jobs_are_gangs
from t9kjobs.testing.kit.managed import jobs_managed_elsewhere_are_left_alone
from t9kjobs.testing.kit.meaning import addresses_name_the_job, ranks_cover_the_world
from t9kjobs.testing.kit.noio import HookIOError
from t9kjobs.testing.kit.queues import jobs_wait_in_queues
from t9kjobs.testing.kit.runnable import (
    arguments_survive_the_shell,
    host_names_resolve,
    scripts_parse,
)
from t9kjobs.testing.kit.subject import Subject
from t9kjobs.testing.kit.validity import example_is_valid, invalid_example_is_rejected
from t9kjobs.testing.kit.verdicts import (
    compute_status_all_succeeded,
    compute_status_fails_on_lost_replicas,
    compute_status_never_regresses,
    compute_status_no_pods,
    compute_status_one_failed,
    compute_status_pairs_outcomes,
)
from t9kjobs.testing.kit.violation import ContractViolation

__all__ = [
    "EXAMPLE_CONTRACTS",
    "FEATURE_CONTRACTS",
    "FEATURE_EXAMPLE_CONTRACTS",
    "INVALID_CONTRACTS",
    "KIND_CONTRACTS",
    "PLUGIN_CONTRACTS",
    "VIOLATIONS",
    "Contract",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Contract(Generic[T]):
    """A named check over one target: None (the plugin), a kind, or an example."""

    name: str
    check: Callable[[Subject, T], None]

    @property
    def title(self) -> str:
        return (self.check.__doc__ or self.name).strip().splitlines()[0].rstrip(".")

    @property
    def details(self) -> str:
        """The docstring after its first line: what exactly is checked."""
        doc = (self.check.__doc__ or "").strip().split("\n", 1)
        return (
            " ".join(line.strip() for line in doc[1].splitlines()).strip() if len(doc) > 1 else ""
        )


# What a broken contract raises: reported as the contract and the message, without a traceback.
VIOLATIONS: tuple[type[Exception], ...] = (ContractViolation, HookIOError)

PLUGIN_CONTRACTS: list[Contract[None]] = [
    Contract("loads_through_entry_point", loads_through_entry_point),
    Contract("declares_kinds_and_spec_model", declares_kinds_and_spec_model),
]
KIND_CONTRACTS: list[Contract[str]] = [
    Contract("crd_is_structural", crd_is_structural),
    Contract("crd_is_accepted_by_the_api_server", crd_is_accepted_by_the_api_server),
    Contract("has_examples", has_examples),
    Contract("status_model_is_filled", status_model_is_filled),
]
EXAMPLE_CONTRACTS: list[Contract[Example]] = [
    Contract("example_is_valid", example_is_valid),
    Contract("example_is_admitted", example_is_admitted),
    Contract("build_pods_is_deterministic", build_pods_is_deterministic),
    Contract("pods_are_named_by_convention", pods_are_named_by_convention),
    Contract(
        "children_carry_owner_labels_and_references", children_carry_owner_labels_and_references
    ),
    Contract("launch_command_is_list_of_str", launch_command_is_list_of_str),
    Contract("compute_status_no_pods", compute_status_no_pods),
    Contract("compute_status_all_succeeded", compute_status_all_succeeded),
    Contract("compute_status_one_failed", compute_status_one_failed),
    Contract("compute_status_fails_on_lost_replicas", compute_status_fails_on_lost_replicas),
    Contract("compute_status_pairs_outcomes", compute_status_pairs_outcomes),
    Contract("compute_status_never_regresses", compute_status_never_regresses),
    Contract("hooks_do_no_io", hooks_do_no_io),
    Contract("children_are_of_declared_kinds", children_are_of_declared_kinds),
    Contract(
        "compute_status_waits_for_restarting_replicas",
        compute_status_waits_for_restarting_replicas,
    ),
    Contract("subdomains_have_headless_services", subdomains_have_headless_services),
    Contract("pods_use_only_declared_objects", pods_use_only_declared_objects),
    Contract("training_container_exists", training_container_exists),
    Contract("validate_checks_run_mode", validate_checks_run_mode),
    Contract("pods_follow_restart_policy", pods_follow_restart_policy),
    Contract("jobs_are_gangs", jobs_are_gangs),
    Contract("jobs_wait_in_queues", jobs_wait_in_queues),
    Contract("jobs_managed_elsewhere_are_left_alone", jobs_managed_elsewhere_are_left_alone),
    Contract("host_names_resolve", host_names_resolve),
    Contract("scripts_parse", scripts_parse),
    Contract("arguments_survive_the_shell", arguments_survive_the_shell),
    Contract("ranks_cover_the_world", ranks_cover_the_world),
    Contract("addresses_name_the_job", addresses_name_the_job),
]
FEATURE_CONTRACTS: list[Contract[None]] = [
    Contract("loads_through_entry_point", loads_through_entry_point),
    Contract("declares_options_and_child_kinds", declares_options_and_child_kinds),
]
FEATURE_EXAMPLE_CONTRACTS: list[Contract[Example]] = [
    Contract("example_is_valid", example_is_valid),
    Contract("hooks_do_no_io", hooks_do_no_io),
    Contract(
        "children_carry_owner_labels_and_references", children_carry_owner_labels_and_references
    ),
    Contract("children_are_of_declared_kinds", children_are_of_declared_kinds),
]
INVALID_CONTRACTS: list[Contract[Example]] = [
    Contract("invalid_example_is_rejected", invalid_example_is_rejected),
]
