"""What the operator makes of slurmdbd's log: a run of database failures ending it is named; a start's
one or two failed tries, or failures followed by anything else, are not. (The lines' shape is a real
slurmdbd's: tests/slurm/test_accounting.py feeds diagnose() the log of one given a bad config.)"""
from soperator.reconcile.accounting import FAILED_TRIES, diagnose

TRY = ("slurmdbd: Connection failed to host = db user = slurm port = 3306\n"
       "slurmdbd: error: mysql_real_connect failed: {code} {text}\n"
       "slurmdbd: error: The database must be up when starting the MYSQL plugin.  Trying again in 5 seconds.\n")
DENIED = TRY.format(code=1045, text="Access denied for user 'slurm'@'10.0.0.7' (using password: YES)")
REFUSED = TRY.format(code=2003, text="Can't connect to server on 'db' (111)")


def test_a_run_of_failures_ending_the_log_is_named_by_its_last_error():
    assert diagnose(DENIED * FAILED_TRIES)[0] == "DatabaseAccessDenied"
    assert diagnose(DENIED * FAILED_TRIES + REFUSED)[0] == "DatabaseUnreachable"
    assert diagnose(REFUSED * FAILED_TRIES)[1].endswith("Can't connect to server on 'db' (111)")
    assert diagnose(TRY.format(code=1146, text="Table missing") * FAILED_TRIES)[0] == "DatabaseError"


def test_a_start_race_or_a_recovered_slurmdbd_is_not():
    assert diagnose(DENIED * (FAILED_TRIES - 1)) is None
    assert diagnose(DENIED * FAILED_TRIES + "slurmdbd: slurmdbd version 24.11.5 started\n") is None
    assert diagnose("") is None
