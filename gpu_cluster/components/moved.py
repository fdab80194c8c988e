"""Resources that moved into a component keep their URNs' identity (no replacement).

A URN holds the parent's type chain, so a resource that moves from a platform into one of the
reusable components gets a new URN; an alias to its old parent (same name and type) lets the
engine match it to the resource it already manages (pulumi.com/docs/iac/concepts/options/
aliases).
"""

from __future__ import annotations

import pulumi


def moved_from(old_parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for a component created under `old_parent` whose children used to be
    `old_parent`'s own: each child answers to its URN there too.

    Transformations reach every descendant, but only the component's own children moved: a
    grandchild's old URN follows from its parent's alias, which the engine multiplies out
    itself (pulumi/pulumi pkg/resource/deploy/step_generator.go, generateAliases)."""
    cut: list[pulumi.Resource] = []  # the components created with these options

    def alias_old_urn(
        args: pulumi.ResourceTransformationArgs,
    ) -> pulumi.ResourceTransformationResult | None:
        if args.opts.parent is old_parent:
            cut.append(args.resource)  # the component itself is new
            return None
        if not any(args.opts.parent is component for component in cut):
            return None
        alias = pulumi.Alias(parent=old_parent)
        return pulumi.ResourceTransformationResult(
            args.props,
            pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(aliases=[alias])),
        )

    return pulumi.ResourceOptions(parent=old_parent, transformations=[alias_old_urn])
