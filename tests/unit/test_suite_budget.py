"""bench/suite_budget.py reads pytest's JUnit XML into seconds per part of the suite."""
from bench.suite_budget import budget, part_of, report

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" time="100.5">
<testcase classname="tests.kube.test_user_path" name="test_a" time="60.0"/>
<testcase classname="tests.kube.test_node" name="test_b" time="5.5"/>
<testcase classname="tests.unit.test_plan" name="test_c" time="0.25"/>
<testcase classname="tests.e2e.test_jail_e2e.TestJail" name="test_d" time="30.0"/>
</testsuite></testsuites>"""


def test_parts_by_folder_and_module():
    assert part_of("tests.kube.test_user_path", "folder") == "tests/kube"
    assert part_of("tests.e2e.test_jail_e2e.TestJail", "module") == "tests/e2e/test_jail_e2e.py"
    seconds, counts, wall = budget(XML)
    assert seconds == {"tests/kube": 65.5, "tests/unit": 0.25, "tests/e2e": 30.0}
    assert counts["tests/kube"] == 2 and wall == 100.5


def test_report_lists_the_largest_part_first_and_the_wall_time():
    lines = report(*budget(XML, "module")).splitlines()
    assert lines[2] == "| tests/kube/test_user_path.py | 1 | 60 |"
    assert lines[-1] == "| **session wall time** | | 100 |"
