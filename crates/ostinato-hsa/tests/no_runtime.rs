//! Without ROCr: opening the runtime is a clear error naming every path it looked in, of kind
//! BackendMissing (this machine and CI have no ROCm; where one is installed, the test says so).

use ostinato::ErrorKind;
use ostinato_hsa::rocr::{candidates, Rocr};

#[test]
fn without_rocr_the_error_names_what_was_looked_for() {
    match Rocr::load() {
        Ok(_) => eprintln!("no_runtime: skipped: an HSA runtime is installed here"),
        Err(e) => {
            let msg = e.to_string();
            assert_eq!(e.kind(), ErrorKind::BackendMissing, "{msg}");
            assert!(msg.starts_with("no HSA runtime found"), "{msg}");
            for c in candidates() {
                assert!(msg.contains(&c), "{msg} does not name {c}");
            }
            assert!(msg.contains("libhsa-runtime64.so.1"), "{msg}");
        }
    }
}
