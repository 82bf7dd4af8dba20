"""kafka-python 3.x's KafkaAdminClient ACL and SCRAM methods, on fastmq's Admin (admin_security), shaped as
kafka-python returns them: describe_acls a (list of ACL, NoError) pair, create_acls {"succeeded": [ACL],
"failed": [error class]}, delete_acls [(filter, [ACL], error class)], alter_user_scram_credentials {user: error
message or None}, describe_user_scram_credentials {user: {"error", "credential_infos"}}. kafka-python's own ACL,
ACLFilter and SCRAM alteration objects are taken as fastmq's.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from fastmq.kafka import errors as kerrors
from fastmq.kafka.admin import Admin
from fastmq.kafka.admin_security_types import ScramMechanism, acl_from_wire


def _error_class(code: int) -> type[kerrors.BrokerResponseError]:
    return kerrors.for_code(code) if code else kerrors.NoError


class SecurityMethods:
    """The ACL and SCRAM methods of compat_admin.KafkaAdminClient (which supplies _admin and _deadline)."""

    _admin: Admin
    _deadline: Callable[[float | None], float]

    def describe_acls(self, acl_filter: Any) -> tuple[list[Any], type]:
        """(the ACLs that match an ACLFilter, NoError); the broker's error (SecurityDisabledError without an
        authorizer) raises."""
        response = self._admin._describe_acls(acl_filter, self._deadline(None)).response
        if response.error_code:
            raise kerrors.for_code(response.error_code)(response.error_message)
        return [acl_from_wire(acl, resource.resource_type, resource.resource_name, resource.pattern_type)
                for resource in response.resources for acl in resource.acls], kerrors.NoError

    def create_acls(self, acls: list[Any]) -> dict[str, list[Any]]:
        """Create ACLs; {"succeeded": [the ACLs created], "failed": [the error class of each failure]}."""
        acls = list(acls)
        response = self._admin._create_acls(acls, self._deadline(None)).response
        results: dict[str, list[Any]] = {"succeeded": [], "failed": []}
        for acl, result in zip(acls, response.results):
            if result.error_code:
                results["failed"].append(kerrors.for_code(result.error_code))
            else:
                results["succeeded"].append(acl)
        return results

    def delete_acls(self, acl_filters: list[Any]) -> list[tuple[Any, list[Any], type]]:
        """Delete the ACLs matching each ACLFilter; [(filter, [the ACLs deleted], error class)]."""
        acl_filters = list(acl_filters)
        response = self._admin._delete_acls(acl_filters, self._deadline(None)).response
        return [(acl_filter, [acl_from_wire(m, m.resource_type, m.resource_name, m.pattern_type)
                              for m in result.matching_acls], _error_class(result.error_code))
                for acl_filter, result in zip(acl_filters, response.filter_results)]

    def alter_user_scram_credentials(self, alterations: Iterable[Any]) -> dict[str, str | None]:
        """Apply UserScramCredentialUpsertion / UserScramCredentialDeletion changes; {user: the error message,
        or None on success}."""
        response = self._admin._alter_scram(alterations, self._deadline(None)).response
        return {r.user: (r.error_message if r.error_code else None) for r in response.results}

    def describe_user_scram_credentials(self, users: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """{user: {"error": None or the message, "credential_infos": [{"mechanism": ScramMechanism,
        "iterations": n}]}} of the users (None: every user with credentials)."""
        response = self._admin._describe_scram(users, self._deadline(None)).response
        if response.error_code:
            raise kerrors.for_code(response.error_code)(
                f"DescribeUserScramCredentialsRequest failed: {response.error_message}")
        return {r.user: {"error": r.error_message if r.error_code else None,
                         "credential_infos": [] if r.error_code else [
                             {"mechanism": ScramMechanism.of(c.mechanism), "iterations": c.iterations}
                             for c in r.credential_infos]}
                for r in response.results}
