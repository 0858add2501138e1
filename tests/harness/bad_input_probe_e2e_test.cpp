// A slice of bad inputs to every command, each run through the real `harness` program (in CI the ASan + UBSan build,
// so a crash or undefined behaviour on any of them fails here): each must end with the usage exit code 2 and a
// message that names the flag, file or word at fault, and none may show a sanitizer report, a signal, a raw library
// error id or CLI11's bare "A subcommand is required".
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

struct BadInput {
  std::vector<std::string> args;  // after --db
  std::string names;              // a fragment the message must hold
};

const std::vector<BadInput> kBadInputs = {
    // record
    {{"record", "--runs", "0", "--", "true"}, "--runs: expected a whole number in [1, 100000], got '0'"},
    {{"record", "--runs", "-1", "--", "true"}, "--runs"},
    {{"record", "--runs", "abc", "--", "true"}, "got 'abc'"},
    {{"record", "--runs", "2147483648", "--", "true"}, "--runs"},
    {{"record", "--runs", "2", "--alpha", "nan", "--", "true"}, "--alpha: expected a finite number"},
    {{"record", "--runs", "2", "--alpha", "1.5", "--", "true"}, "--alpha"},
    {{"record", "--runs", "2", "--target", "inf", "--", "true"}, "--target: expected a finite number"},
    {{"record", "--runs", "2", "--target", "nan", "--", "true"}, "--target"},
    {{"record", "--runs", "2", "--timeout", "nan", "--", "true"}, "--timeout"},
    {{"record", "--runs", "2", "--timeout", "-5", "--", "true"}, "--timeout"},
    {{"record", "--runs", "2", "--first-seed", "-1", "--", "true"}, "--first-seed"},
    {{"record", "--runs", "2", "--first-seed", "9223372036854775807", "--", "true"}, "the last seed would be beyond"},
    {{"record", "--runs", "2", "--name", "", "--", "true"}, "--name: '': expected a non-empty name"},
    {{"record", "--runs", "2", "--name", "a/b", "--", "true"}, "(no paths)"},
    {{"record", "--runs", "2", "--set", "x=1", "--", "true"}, "--backend/--set"},
    {{"record", "--runs", "2", "--data", "/nonexistent/corpus"}, "--data"},
    {{"record", "--resume", "nosuchsweep"}, "--resume: no sweep 'nosuchsweep'"},
    {{"record", "--runs"}, "--runs"},
    {{"record", "--bogus-flag"}, "--bogus-flag"},
    // compare
    {{"compare"}, "--runs"},
    {{"compare", "--runs", "0"}, "--runs"},
    {{"compare", "--runs", "2"}, "--baseline and --candidate are required"},
    {{"compare", "--runs", "2", "--fail-if-slower", "nan"}, "--fail-if-slower"},
    {{"compare", "--resume", "nosuch"}, "nosuch"},
    // plan
    {{"plan", "--std", "1e-300"}, "--mean and --std go together"},
    {{"plan", "--std", "nan"}, "--std: expected a finite number"},
    {{"plan", "--std", "-1"}, "--std"},
    {{"plan", "--alpha", "2"}, "--alpha"},
    {{"plan", "--sweep", "nosuch"}, "nosuch"},
    // query
    {{"query"}, "harness query: give a command (one of: sweeps, runs, history, env, sql)"},
    {{"query", "nosuchthing"}, "harness query: unknown command 'nosuchthing' (expected one of: sweeps, runs"},
    {{"query", "--bogus"}, "harness query: unknown option '--bogus'"},
    {{"query", "runs", "--sweep", "nosuch"}, "--sweep: no sweep 'nosuch'"},
    {{"query", "runs", "--format", "xml"}, "--format: xml not in {table,csv,json}"},
    {{"query", "sql", "DELETE FROM runs"}, "read-only statements only"},
    {{"query", "sql", "SELECT 1; DELETE FROM runs"}, "one SQL statement at a time"},
    {{"query", "sql", ""}, "empty SQL statement"},
    {{"query", "history"}, "query history: give the benchmark"},
    {{"query", "history", "--name", ""}, "query history"},
    // report, import, check-db, site
    {{"report"}, "--sweep is required"},
    {{"report", "--sweep", "nosuch"}, "--sweep: no sweep 'nosuch'"},
    {{"report", "--sweep", "999999"}, "no sweep '999999'"},
    {{"import"}, "paths is required"},
    {{"import", "/nonexistent/path"}, "import: no such file or folder '/nonexistent/path'"},
    {{"import", "/dev/null"}, "'/dev/null' is neither a log file nor a folder of them"},
    {{"check-db", "--bogus"}, "--bogus"},
    {{"site"}, "--out is required"},
    // nightly
    {{"nightly", "--ingest", "/nonexistent.json"}, "/nonexistent.json: cannot read benchmark JSON"},
    {{"nightly", "--ingest", "/dev/null"}, "/dev/null: not valid Google Benchmark JSON: parse error at line 1"},
    {{"nightly", "--bogus"}, "--bogus"},
    // global options and command words
    {{"--db-timeout", "-1", "query", "runs"}, "--db-timeout"},
    {{"--db-timeout", "abc", "query", "runs"}, "--db-timeout"},
    {{"--log-level", "shout", "query", "runs"}, "--log-level: 'shout' is not a log level"},
    {{}, "harness: give a command (one of: record, import, query, plan, report, check-db, site, compare, nightly)"},
    {{"nosuchcommand"}, "harness: unknown command 'nosuchcommand' (expected one of: record, import"},
    {{"--bogus"}, "harness: unknown option '--bogus'"},
};

class BadInputProbe : public RecordE2E {};

TEST_F(BadInputProbe, EveryBadInputIsAUsageErrorThatNamesItsCause) {
  ASSERT_GE(kBadInputs.size(), 50u);
  for (const BadInput& input : kBadInputs) {
    std::string shown;
    for (const std::string& a : input.args) shown += " '" + a + "'";
    SCOPED_TRACE("harness --db DB" + shown);
    const Result r = harness(input.args, {{"SPEEDRUN_DB", ""}});
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(input.names), std::string::npos) << r.output;
    for (const char* never : {"AddressSanitizer", "runtime error:", "LeakSanitizer", "json.exception",
                              "terminate called", "A subcommand is required", "Segmentation"}) {
      EXPECT_EQ(r.output.find(never), std::string::npos) << never << " in: " << r.output;
    }
  }
}

}  // namespace
}  // namespace gpt::harness
