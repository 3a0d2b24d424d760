"""Everything one run can measure: the op families, tiers and providers, built-in and from plugins.

Built once per process from the modules that exist (suite/ops/, suite/providers/) and the plugins asked
for; passed to whoever needs it (config schema, plan, asv harness, library API), never a global filled at
import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from .config import RESERVED_SECTIONS, CompileMode
from .measure.compose import mix_providers
from .ops import builtin_families
from .ops.base import Family, Op
from .plugins import Plugin, PluginError
from .plugins import load as load_plugins
from .providers import builtin_providers
from .providers.base import Provider, with_op_rule
from .tiers import BUILTIN, Tier, is_color

# A family's name is its config section's key.
_SECTION = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass
class Catalog:
    families: list[Family]
    tiers: dict[str, Tier]
    plugin_providers: list[Provider] = field(default_factory=list)
    plugins: list[Plugin] = field(default_factory=list)

    @cached_property
    def ops(self) -> dict[str, Op]:
        return {op.name: op for family in self.families for op in family.ops}

    def family(self, name: str) -> Family:
        return next(f for f in self.families if f.name == name)

    def providers(self, compile_modes: Iterable[str] = ("default",), dynamic: bool = False) -> list[Provider]:
        """Every provider of every op: the tiers' adapters over the ops, then the plugins' own, each behind
        its op's own availability rule."""
        ops = list(self.ops.values())
        found = builtin_providers(ops, list(compile_modes), dynamic) + self.plugin_providers
        found += mix_providers(self.ops, found)  # composite ops' best mix, chosen among all of these
        return [with_op_rule(p, self.ops[p.op]) for p in found]

    def own_code_providers(self) -> tuple[str, ...]:
        """Names of providers that are own code (their tier, or the provider where its tier is mixed): their
        history is judged, the rest are controls."""
        own = {p.name for p in self.providers() if (self.tiers[p.tier].own_code if p.own_code is None else p.own_code)}
        return tuple(sorted(own))


def build(plugin_names: Iterable[str] = (), entry_points: bool = True) -> Catalog:
    """The built-in catalog plus the plugins; a clear PluginError for anything that does not fit."""
    families = builtin_families()
    tiers = dict(BUILTIN)
    plugins = load_plugins(plugin_names, entry_points)
    providers: list[Provider] = []
    for plugin in plugins:
        for tier in plugin.tiers:
            if tier.name in tiers and tiers[tier.name] != tier:
                raise PluginError(f"plugin {plugin.name!r}: tier {tier.name!r} is already defined")
            if not is_color(tier.color):
                raise PluginError(
                    f"plugin {plugin.name!r}: tier {tier.name!r} has color {tier.color!r}; give a hex color "
                    "like #1f77b4"
                )
            tiers[tier.name] = tier
        for family in plugin.families:
            if any(f.name == family.name for f in families):
                raise PluginError(f"plugin {plugin.name!r}: op family {family.name!r} is already defined")
            if family.name in RESERVED_SECTIONS:
                raise PluginError(
                    f"plugin {plugin.name!r}: op family {family.name!r} would take the run's own config key "
                    f"{family.name!r}; the run's keys: {', '.join(sorted(RESERVED_SECTIONS))}"
                )
            if not _SECTION.fullmatch(family.name):
                raise PluginError(
                    f"plugin {plugin.name!r}: op family {family.name!r} is not a config key (letters, digits "
                    "and '_', starting with a letter)"
                )
            # Records, providers and a composite's parts find an op by its name: two of one name would mix.
            owners = {op.name: f.name for f in families for op in f.ops}
            for op in family.ops:
                if op.name in owners:
                    raise PluginError(
                        f"plugin {plugin.name!r}: op {op.name!r} is already defined (family {owners[op.name]})"
                    )
            families.append(family)
    ops = {op.name: op for family in families for op in family.ops}
    builtin = builtin_providers(list(ops.values()), [m.value for m in CompileMode], False)
    builtin += builtin_providers(list(ops.values()), [m.value for m in CompileMode], True)
    builtin_names = {p.name for p in builtin}
    taken = {(p.op, p.name) for p in builtin}
    for plugin in plugins:
        # A plugin's family may declare its own providers as a built-in family does: they are the plugin's.
        declared = [p for f in plugin.families if f.providers is not None for p in f.providers(list(f.ops))]
        for provider in [*plugin.providers, *declared]:
            if provider.name in builtin_names:
                raise PluginError(
                    f"plugin {plugin.name!r}: provider {provider.name!r} has the name of a built-in provider; "
                    "give it a name of its own"
                )
            if provider.tier not in tiers:
                raise PluginError(
                    f"plugin {plugin.name!r}: provider {provider.name!r} names tier {provider.tier!r}; "
                    f"tiers: {', '.join(tiers)} (a plugin may declare its own in TIERS)"
                )
            if provider.op not in ops:
                raise PluginError(
                    f"plugin {plugin.name!r}: provider {provider.name!r} is for op {provider.op!r}; "
                    f"ops: {', '.join(ops)}"
                )
            if (provider.op, provider.name) in taken:
                raise PluginError(
                    f"plugin {plugin.name!r}: a provider named {provider.name!r} exists already for {provider.op}"
                )
            taken.add((provider.op, provider.name))
            providers.append(provider)
    families.sort(key=lambda f: (f.order, f.name))
    return Catalog(families, tiers, providers, plugins)
