"""Schemas of the security administration messages: ACLs and SCRAM credentials.

In the notation of schema.py; facts from Apache Kafka's message specifications. ACL resource types: 1 any,
2 topic, 3 group, 4 cluster, 5 transactional id, 6 delegation token, 7 user (v3+); operations: 1 any, 2 all,
3 read ... 14 describe tokens; permissions: 1 any, 2 deny, 3 allow; pattern types: 1 any, 2 match, 3 literal,
4 prefixed. SCRAM mechanisms: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

SCHEMAS = """
DescribeAcls 29 versions=0-3 flexible=2+
request
  resource_type_filter: int8 0+
  resource_name_filter: string 0+ nullable=0+
  pattern_type_filter: int8 1+ =3
  principal_filter: string 0+ nullable=0+
  host_filter: string 0+ nullable=0+
  operation: int8 0+
  permission_type: int8 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  resources: []DescribeAclsResource 0+
    resource_type: int8 0+
    resource_name: string 0+
    pattern_type: int8 1+ =3
    acls: []AclDescription 0+
      principal: string 0+
      host: string 0+
      operation: int8 0+
      permission_type: int8 0+

CreateAcls 30 versions=0-3 flexible=2+
request
  creations: []AclCreation 0+
    resource_type: int8 0+
    resource_name: string 0+
    resource_pattern_type: int8 1+ =3
    principal: string 0+
    host: string 0+
    operation: int8 0+
    permission_type: int8 0+
response
  throttle_time_ms: int32 0+
  results: []AclCreationResult 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+

DeleteAcls 31 versions=0-3 flexible=2+
request
  filters: []DeleteAclsFilter 0+
    resource_type_filter: int8 0+
    resource_name_filter: string 0+ nullable=0+
    pattern_type_filter: int8 1+ =3
    principal_filter: string 0+ nullable=0+
    host_filter: string 0+ nullable=0+
    operation: int8 0+
    permission_type: int8 0+
response
  throttle_time_ms: int32 0+
  filter_results: []DeleteAclsFilterResult 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
    matching_acls: []DeleteAclsMatchingAcl 0+
      error_code: int16 0+
      error_message: string 0+ nullable=0+
      resource_type: int8 0+
      resource_name: string 0+
      pattern_type: int8 1+ =3
      principal: string 0+
      host: string 0+
      operation: int8 0+
      permission_type: int8 0+

DescribeUserScramCredentials 50 versions=0 flexible=0+
request
  users: []UserName 0+ nullable=0+
    name: string 0+
response
  throttle_time_ms: int32 0+
  error_code: int16 0+
  error_message: string 0+ nullable=0+
  results: []DescribeUserScramCredentialsResult 0+
    user: string 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
    credential_infos: []CredentialInfo 0+
      mechanism: int8 0+
      iterations: int32 0+

AlterUserScramCredentials 51 versions=0 flexible=0+
request
  deletions: []ScramCredentialDeletion 0+
    name: string 0+
    mechanism: int8 0+
  upsertions: []ScramCredentialUpsertion 0+
    name: string 0+
    mechanism: int8 0+
    iterations: int32 0+
    salt: bytes 0+
    salted_password: bytes 0+
response
  throttle_time_ms: int32 0+
  results: []AlterUserScramCredentialsResult 0+
    user: string 0+
    error_code: int16 0+
    error_message: string 0+ nullable=0+
"""
