"""Runs rdma-core's pyverbs suite as its run_tests.py does, and also writes every test's outcome.

    pyverbs_run.py TESTS_DIR OUTCOMES_TSV [run_tests.py arguments...]

TESTS_DIR is a copy of the suite (a package named `tests`). OUTCOMES_TSV gets one line per test:
its id, its outcome (pass, fail, error, skip, xfail, xpass, excluded), the first line of the
reason and the seconds the test took (setUp and tearDown included; empty for a test not run, and
0 for one its class's setUpClass skipped or failed). The verbose output and the exit status are
unittest's own.

PYVERBS_EXCLUDE (test ids or class ids, space separated) names tests that are not run at all:
those that kill the interpreter on some line. Each is written to OUTCOMES_TSV as excluded.

Outcomes are written as the tests end, and OUTCOMES_TSV.current names the test running, so that
when a test kills the interpreter (the stock provider of some lines dies of SIGSEGV at places
that move from run to run) the caller can record it and run the rest: with PYVERBS_RESUME set,
the tests already in OUTCOMES_TSV are not run again and new outcomes are appended.
"""
import os
import sys
import time
import unittest
from importlib.machinery import SourceFileLoader


def main():
    tests_dir, outcomes_path, run_args = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path.insert(0, tests_dir)
    sys.argv = [os.path.join(tests_dir, "run_tests.py")] + run_args
    from args_parser import parser  # noqa: E402 (the suite's own, found through sys.path)

    tests = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
    parser.parse_args()
    resume = bool(os.environ.get("PYVERBS_RESUME"))
    done = set()
    if resume and os.path.exists(outcomes_path):
        with open(outcomes_path) as previous:
            done = {line.split("\t", 1)[0] for line in previous if line.strip()}
    out = open(outcomes_path, "a" if resume else "w")
    current_path = outcomes_path + ".current"

    started = {}  # test id: time.monotonic() at its startTest

    class Outcomes(list):
        """Each outcome goes to the file at once: a crash loses only the test that crashed."""

        def append(self, item):
            super().append(item)
            test_id, outcome, reason = item
            if outcome == "excluded":
                seconds = ""
            elif test_id in started:
                seconds = f"{time.monotonic() - started.pop(test_id):.2f}"
            else:  # reported without being started: its class's setUpClass skipped or failed
                seconds = "0"
            out.write(f"{test_id}\t{outcome}\t{reason.replace(chr(9), ' ')}\t{seconds}\n")
            out.flush()

    outcomes = Outcomes()

    def first_line(text):
        return str(text).strip().splitlines()[-1][:200] if str(text).strip() else ""

    class RecordingResult(unittest.TextTestResult):
        def startTest(self, test):
            with open(current_path, "w") as current:
                current.write(test.id() + "\n")
            started[test.id()] = time.monotonic()
            super().startTest(test)

        def addSuccess(self, test):
            super().addSuccess(test)
            outcomes.append((test.id(), "pass", ""))

        def addFailure(self, test, err):
            super().addFailure(test, err)
            outcomes.append((test.id(), "fail", first_line(self.failures[-1][1])))

        def addError(self, test, err):
            super().addError(test, err)
            outcomes.append((test.id(), "error", first_line(self.errors[-1][1])))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            outcomes.append((test.id(), "skip", first_line(reason)))

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            outcomes.append((test.id(), "xfail", ""))

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            outcomes.append((test.id(), "xpass", ""))

    excluded = set(os.environ.get("PYVERBS_EXCLUDE", "").split())

    def prune(suite):
        kept = unittest.TestSuite()
        for test in suite:
            if isinstance(test, unittest.TestSuite):
                kept.addTest(prune(test))
            elif test.id() in done:
                continue
            elif test.id() in excluded or test.id().rsplit(".", 1)[0] in excluded:
                if (test.id(), "excluded", "in PYVERBS_EXCLUDE") not in outcomes:
                    outcomes.append((test.id(), "excluded", "in PYVERBS_EXCLUDE"))
            else:
                kept.addTest(test)
        return kept

    class PruningLoader(unittest.TestLoader):
        # The suite's load_tests calls this for each of its modules, unittest.main for the package.
        def loadTestsFromModule(self, module, *args, **kwargs):
            return prune(super().loadTestsFromModule(module, *args, **kwargs))

    runner = unittest.TextTestRunner(verbosity=2, resultclass=RecordingResult)
    program = unittest.main(module=tests, testRunner=runner, testLoader=PruningLoader(), exit=False)
    out.close()
    if os.path.exists(current_path):
        os.remove(current_path)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
