//! The case programs' command line (nd-conformance, and nd-scale through a `#[path]` module):
//! `--list` prints the case names; `CASE` runs the named case and prints `PASS CASE`, or
//! `FAIL CASE: why` and exits 1; an unknown case or no argument exits 2.

/// A case's result: `Err` says why it failed.
pub type Outcome = Result<(), String>;

/// A case: a name on the command line, and the function that runs it.
pub type Case = fn() -> Outcome;

/// Runs the command line `args` (the program's name left out) over `cases`; `program` names the
/// program in the usage line.
pub fn run(program: &str, cases: &[(&str, Case)], args: &[String]) {
    match args.first().map(String::as_str) {
        Some("--list") => cases.iter().for_each(|(name, _)| println!("{name}")),
        Some(name) => match cases.iter().find(|(n, _)| *n == name) {
            Some((_, case)) => match case() {
                Ok(()) => println!("PASS {name}"),
                Err(why) => {
                    println!("FAIL {name}: {why}");
                    std::process::exit(1);
                }
            },
            None => {
                eprintln!("no case {name}; --list shows them");
                std::process::exit(2);
            }
        },
        None => {
            eprintln!("usage: {program} CASE | --list");
            std::process::exit(2);
        }
    }
}
