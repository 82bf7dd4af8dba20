"""The admin client's security operations: ACLs (DescribeAcls, CreateAcls, DeleteAcls) and SCRAM credentials
(DescribeUserScramCredentials, AlterUserScramCredentials).

ACL requests go to any broker (a KRaft broker forwards the changes to the controller); a broker without an
authorizer answers SECURITY_DISABLED. SCRAM changes go to the controller, descriptions to any broker. The types
are admin_security_types'.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from fastmq.kafka import errors as kerrors
from fastmq.kafka import protocol as kp
from fastmq.kafka.admin_groups import GroupAdmin
from fastmq.kafka.admin_security_types import (
    ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter, ResourceType,
    ScramMechanism, acl_from_wire,
)
from fastmq.kafka.admin_wire import _error, _Reply



class ScramCredentials(NamedTuple):
    """A user's SCRAM credentials: {mechanism: iterations}, or the error that kept them from being read."""

    user: str
    error: kerrors.KafkaError | None
    iterations: dict[ScramMechanism, int]


def _check_all(items: list[Any], concrete: bool, what: str) -> None:
    """Every item has an ACL's fields (fastmq's ACL or ACLFilter, or kafka-python's); a concrete one names one
    binding: no ANY operation, permission, resource type or pattern, no MATCH pattern."""
    for item in items:
        pattern = getattr(item, "resource_pattern", None)
        if pattern is None or not all(hasattr(item, name) for name in ACLFilter.FIELDS) or not all(
                hasattr(pattern, name) for name in ResourcePatternFilter.FIELDS):
            raise kerrors.IllegalArgumentError(f"{what} must hold {'ACL' if concrete else 'ACLFilter'} objects, "
                                               f"not {item!r}")
        if concrete and (item.operation == ACLOperation.ANY or item.permission_type == ACLPermissionType.ANY
                         or pattern.resource_type == ResourceType.ANY or pattern.pattern_type in (
                             ACLResourcePatternType.ANY, ACLResourcePatternType.MATCH)):
            raise kerrors.IllegalArgumentError(f"{what} must be concrete ACLs, not the filter {item!r}")


def _filter_fields(acl_filter: ACLFilter) -> dict[str, Any]:
    """The fields of a DescribeAcls request or a DeleteAcls filter."""
    pattern = acl_filter.resource_pattern
    return dict(resource_type_filter=int(pattern.resource_type), resource_name_filter=pattern.resource_name,
                pattern_type_filter=int(pattern.pattern_type), principal_filter=acl_filter.principal,
                host_filter=acl_filter.host, operation=int(acl_filter.operation),
                permission_type=int(acl_filter.permission_type))


class SecurityAdmin(GroupAdmin):
    """The ACL and SCRAM operations of Admin (see the module docstring)."""

    # ---- ACLs ---------------------------------------------------------------------------------------------

    def describe_acls(self, acl_filter: ACLFilter, *, timeout: float | None = None) -> list[ACL]:
        """The ACL bindings that match the filter; the broker's error (SecurityDisabledError without an
        authorizer) raises."""
        response = self._describe_acls(acl_filter, self._deadline(timeout)).response
        error = _error(response.error_code, response.error_message, "DescribeAcls")
        if error is not None:
            raise error
        return [acl_from_wire(acl, resource.resource_type, resource.resource_name, resource.pattern_type)
                for resource in response.resources for acl in resource.acls]

    def create_acls(self, acls: Iterable[ACL], *, timeout: float | None = None) -> list[kerrors.KafkaError | None]:
        """Create ACL bindings; each one's error (None when it was created), in the order given."""
        acls = list(acls)
        return [_error(r.error_code, r.error_message, f"{acl!r}")
                for acl, r in zip(acls, self._create_acls(acls, self._deadline(timeout)).response.results)]

    def delete_acls(self, acl_filters: Iterable[ACLFilter], *, timeout: float | None = None
                    ) -> list[tuple[ACLFilter, list[ACL], kerrors.KafkaError | None]]:
        """Delete the ACL bindings each filter matches: (filter, the bindings deleted, the filter's error)."""
        acl_filters = list(acl_filters)
        response = self._delete_acls(acl_filters, self._deadline(timeout)).response
        return [(acl_filter, [acl_from_wire(m, m.resource_type, m.resource_name, m.pattern_type)
                              for m in result.matching_acls],
                 _error(result.error_code, result.error_message, f"{acl_filter!r}"))
                for acl_filter, result in zip(acl_filters, response.filter_results)]

    def _describe_acls(self, acl_filter: ACLFilter, deadline: float) -> _Reply:
        _check_all([acl_filter], False, "acl_filter")
        return self._send(None, kp.DescribeAclsRequest(**_filter_fields(acl_filter)), deadline)

    def _create_acls(self, acls: list[Any], deadline: float) -> _Reply:
        _check_all(acls, True, "acls")
        C = kp.CreateAclsRequest.AclCreation
        creations = [C(resource_type=int(acl.resource_pattern.resource_type),
                       resource_name=acl.resource_pattern.resource_name,
                       resource_pattern_type=int(acl.resource_pattern.pattern_type), principal=acl.principal,
                       host=acl.host, operation=int(acl.operation), permission_type=int(acl.permission_type))
                     for acl in acls]
        return self._answering_each(kp.CreateAclsRequest(creations=creations), "results", len(acls), deadline)

    def _delete_acls(self, acl_filters: list[Any], deadline: float) -> _Reply:
        _check_all(acl_filters, False, "acl_filters")
        F = kp.DeleteAclsRequest.DeleteAclsFilter
        request = kp.DeleteAclsRequest(filters=[F(**_filter_fields(f)) for f in acl_filters])
        return self._answering_each(request, "filter_results", len(acl_filters), deadline)

    def _answering_each(self, request: Any, results: str, count: int, deadline: float) -> _Reply:
        """Send a request whose answers are a list in the order of its items; that list must be whole."""
        reply = self._send(None, request, deadline)
        answered = len(getattr(reply.response, results))
        if answered != count:
            raise kerrors.UnknownError(f"{request.API_NAME}: {count} items asked, {answered} answered")
        return reply

    # ---- SCRAM credentials -------------------------------------------------------------------------------

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                        timeout: float | None = None) -> dict[str, ScramCredentials]:
        """The SCRAM mechanisms and iteration counts of the users (None: every user with credentials); a user
        without any has ResourceNotFoundError. A request-level error raises."""
        response = self._describe_scram(users, self._deadline(timeout)).response
        error = _error(response.error_code, response.error_message, "DescribeUserScramCredentials")
        if error is not None:
            raise error
        return {r.user: ScramCredentials(r.user, _error(r.error_code, r.error_message, f"user {r.user!r}"),
                                         {ScramMechanism.of(c.mechanism): c.iterations for c in r.credential_infos})
                for r in response.results}

    def alter_user_scram_credentials(self, alterations: Iterable[Any], *, timeout: float | None = None
                                     ) -> dict[str, kerrors.KafkaError | None]:
        """Apply UserScramCredentialUpsertion and UserScramCredentialDeletion changes; {user: error or None}."""
        response = self._alter_scram(alterations, self._deadline(timeout)).response
        return {r.user: _error(r.error_code, r.error_message, f"user {r.user!r}") for r in response.results}

    def _describe_scram(self, users: Iterable[str] | None, deadline: float) -> _Reply:
        if isinstance(users, str):
            raise TypeError("users must be a list of names, not one str")
        U = kp.DescribeUserScramCredentialsRequest.UserName
        names = None if users is None else [U(name=user) for user in users]
        return self._send(None, kp.DescribeUserScramCredentialsRequest(users=names), deadline)

    def _alter_scram(self, alterations: Iterable[Any], deadline: float) -> _Reply:
        R = kp.AlterUserScramCredentialsRequest
        deletions, upsertions = [], []
        for change in alterations:
            # fastmq's UserScramCredentialUpsertion / Deletion, or kafka-python's: the same fields.
            if not (hasattr(change, "user") and hasattr(change, "mechanism")):
                raise kerrors.IllegalArgumentError(
                    f"alterations must be UserScramCredentialDeletion or UserScramCredentialUpsertion, not {change!r}")
            mechanism = int(ScramMechanism.of(change.mechanism))
            if hasattr(change, "salted_password"):
                upsertions.append(R.ScramCredentialUpsertion(
                    name=change.user, mechanism=mechanism, iterations=change.iterations,
                    salt=bytes(change.salt), salted_password=bytes(change.salted_password)))
            else:
                deletions.append(R.ScramCredentialDeletion(name=change.user, mechanism=mechanism))
        request = R(deletions=deletions, upsertions=upsertions)
        return self._send(self._controller(deadline), request, deadline)
