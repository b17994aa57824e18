"""Which Secrets a spec names, each checked for the admin's label before use (reconcile/secrets.py):
the directory's bind and CA Secrets among them (#61: they skipped the check, so a SlurmCluster writer
could have the operator bind with any Secret's password, to a server of theirs)."""
from soperator.reconcile.secrets import DIRECTORY_SECRETS, referenced_secrets
from tests.conftest import make_cluster

LDAP = {"uris": ["ldaps://ldap.example.org"], "searchBase": "dc=example,dc=org"}


def test_the_directorys_secrets_are_named_with_their_fields():
    cluster = make_cluster(identity={"ldap": {**LDAP, "bindSecret": "bind", "caSecret": "ca"}})
    refs = dict(referenced_secrets(cluster))
    assert refs["spec.identity.ldap.bindSecret"] == "bind" and refs["spec.identity.ldap.caSecret"] == "ca"
    assert set(DIRECTORY_SECRETS) <= set(refs)


def test_an_anonymous_bind_with_public_cas_names_none_and_no_identity_none():
    assert not [f for f, _ in referenced_secrets(make_cluster(identity={"ldap": LDAP})) if "identity" in f]
    assert not [f for f, _ in referenced_secrets(make_cluster()) if "identity" in f]
