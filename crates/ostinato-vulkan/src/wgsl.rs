//! Reading WGSL with naga without risking the caller's stack. naga parses a chain of binary operators
//! (`a + b + c + …`) iteratively but lowers it recursively, one frame per operator: a kernel of 20,000
//! terms in one expression overflows the 8 MiB main stack of a release build (and about a thousand a
//! 4 MiB thread of a debug build), an abort no caller can catch. So a statement of more than
//! [`MAX_STATEMENT_OPERATORS`] operators is refused with its line, and the parse runs on a thread of
//! its own with a stack that holds that many (64 MiB, reserved, touched only as used). So does the rest
//! of a kernel's compilation (`with_stack`): `naga_oil`'s importer, which the element-offset rewrite
//! and the fused dispatches go through, recurses the same way (990 terms overflow a 256 KiB thread).
//! Validation and the SPIR-V writer walk naga's arenas without recursion (checked on a 256 KiB stack
//! with 20,000 terms).

/// The most operator characters one statement (text between `;`, `{` and `}`, comments left out) may
/// hold.
pub const MAX_STATEMENT_OPERATORS: usize = 1000;

/// The parsing thread's stack: room for a statement of [`MAX_STATEMENT_OPERATORS`] operators in a
/// debug build (about 16 KiB a frame there; 0.5 KiB in a release build).
const PARSE_STACK: usize = 64 << 20;

/// `source` read into a naga module; errors as naga renders them, or naming the line of a statement
/// too long to read safely.
pub fn parse(source: &str) -> Result<naga::Module, String> {
    with_stack(|| parse_here(source))?
}

/// [`parse`] on the calling thread, for a caller already on [`with_stack`]'s stack.
pub(crate) fn parse_here(source: &str) -> Result<naga::Module, String> {
    check_statements(source)?;
    naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))
}

/// Runs `f` on a thread of its own with a stack for naga's recursion (the front end's, and
/// `naga_oil`'s importer, which rebuilds an expression's operands before it); `Err` where the thread
/// cannot start or `f` panicked.
pub(crate) fn with_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("ostinato-naga".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(s, f)
            .map_err(|e| format!("cannot start the thread that reads the shader: {e}"))?;
        worker.join().map_err(|_| "reading the shader panicked (naga)".to_string())
    })
}

/// Refuses a statement of more than [`MAX_STATEMENT_OPERATORS`] operator characters, naming its line.
fn check_statements(source: &str) -> Result<(), String> {
    let (mut ops, mut line, mut start_line) = (0usize, 1usize, 1usize);
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek() == Some(&'/') => {
                // A line comment: to the end of the line.
                for n in chars.by_ref() {
                    if n == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                // A block comment (they nest in WGSL).
                chars.next();
                let mut depth = 1;
                while depth > 0 {
                    match chars.next() {
                        Some('\n') => line += 1,
                        Some('/') if chars.peek() == Some(&'*') => {
                            chars.next();
                            depth += 1;
                        }
                        Some('*') if chars.peek() == Some(&'/') => {
                            chars.next();
                            depth -= 1;
                        }
                        Some(_) => {}
                        None => break,
                    }
                }
            }
            ';' | '{' | '}' => {
                ops = 0;
                start_line = line;
            }
            '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^' | '<' | '>' | '=' | '!' | ',' => {
                ops += 1;
                if ops > MAX_STATEMENT_OPERATORS {
                    return Err(format!(
                        "line {start_line}: a statement of more than {MAX_STATEMENT_OPERATORS} operators (naga lowers an expression recursively, a frame per operator; split it with `let`s)"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(terms: usize) -> String {
        format!(
            "// A comment with operators -+*/ that do not count.\n@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) l: vec3<u32>) {{\n    x[l.x] = {};\n}}\n",
            vec!["l.x"; terms].join(" + ")
        )
    }

    #[test]
    fn a_long_statement_is_refused_with_its_line_and_one_within_the_limit_parses_on_a_small_stack() {
        let e = parse(&kernel(20_000)).unwrap_err();
        assert!(e.contains("line 4") && e.contains("more than 1000 operators"), "{e}");
        // Just within the limit, from a thread of 256 KiB: the parse has a stack of its own.
        let src = kernel(MAX_STATEMENT_OPERATORS - 5);
        let ok = std::thread::Builder::new().stack_size(256 << 10).spawn(move || parse(&src).map(|_| ())).unwrap().join().unwrap();
        assert_eq!(ok, Ok(()));
        // Comments do not count, nested block comments included; statements count apart.
        let commented = format!("/* {} /* nested */ {} */\n{}", "-".repeat(5000), "+".repeat(5000), kernel(10));
        assert!(parse(&commented).is_ok());
        let many = (0..3).map(|i| format!("let a{i} = l.x{};", " + l.x".repeat(900))).collect::<Vec<_>>().join("\n");
        let src = format!("@compute @workgroup_size(1)\nfn main(@builtin(local_invocation_id) l: vec3<u32>) {{\n{many}\n}}\n");
        assert!(parse(&src).is_ok());
        // naga's own errors still come through.
        assert!(parse("fn main( {").unwrap_err().contains("error"));
    }
}
