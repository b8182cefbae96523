"""The one door for plugin authors: everything a plugin may use, from one module.

    from t9kjobs.plugin import DesiredPod, Job, KindInfo, Problem, hookimpl, new_pod

A framework plugin (one that owns a kind) and a feature plugin (one that adds to every kind's
pods or children) import from here and from nowhere else in `t9kjobs`: the hook markers and
contracts (`hookimpl`, `JobHooks`), the kind registration (`KindInfo`, `Problem`,
`ReplicaState`, `Verdict`), the shared models (`Job`, `JobSpec`, `JobStatus`, the pod
templates, `RecoveryPolicy`, ...), the child-object builders (`new_pod`, `service`,
`config_map`, ...), the SSH and TensorBoard pieces the ssh kinds share, the shared validation
checks, and what a feature plugin declares (`Option`, `ChildKind`: its options and the child
kinds it creates). For tests, the conformance kit and
`t9kjobs.testing.fixtures` are the other door (docs/conformance.md).

What is exported here is what docs/plugin-api.txt lists and the stability promise covers
(docs/plugin-guide.md, "What a plugin may rely on"); every other module of `t9kjobs` is
internal and may change in any release. The bundled plugins keep to this door: an
import-linter contract (`.importlinter`, "plugins-through-the-door") fails the build otherwise.
"""

from __future__ import annotations

# Star imports on purpose: each module's `__all__` is its part of the door, so a name added
# there is exported here too; the door's surface is their union (docs/plugin-api.txt).
from t9kjobs import features as _features
from t9kjobs import hooks as _hooks
from t9kjobs import kinds as _kinds
from t9kjobs import models as _models
from t9kjobs import objects as _objects
from t9kjobs import ssh as _ssh
from t9kjobs import templating as _templating
from t9kjobs import tensorboard as _tensorboard
from t9kjobs import validation as _validation
from t9kjobs import vocabulary as _vocabulary
from t9kjobs.features import *  # noqa: F403
from t9kjobs.hooks import *  # noqa: F403
from t9kjobs.kinds import *  # noqa: F403
from t9kjobs.models import *  # noqa: F403
from t9kjobs.models import pod_roles as _pod_roles
from t9kjobs.models import ssh as _model_ssh
from t9kjobs.models.pod_roles import *  # noqa: F403
from t9kjobs.models.ssh import *  # noqa: F403
from t9kjobs.objects import *  # noqa: F403
from t9kjobs.ssh import *  # noqa: F403
from t9kjobs.templating import *  # noqa: F403
from t9kjobs.tensorboard import *  # noqa: F403
from t9kjobs.validation import *  # noqa: F403
from t9kjobs.vocabulary import *  # noqa: F403

__all__ = sorted(
    {
        name
        for module in (
            _vocabulary,
            _models,
            _pod_roles,
            _model_ssh,
            _features,
            _kinds,
            _objects,
            _hooks,
            _ssh,
            _tensorboard,
            _templating,
            _validation,
        )
        for name in module.__all__
    }
)
