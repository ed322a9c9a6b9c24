//! An error and its causes on one line, `a: b: c`, as logs and error bodies print them. Each
//! error's own `Display` leaves its source out (STYLE.md), so this is the one place they join.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its sources, separated by `: `.
pub struct ErrorChain<'a>(pub &'a dyn Error);

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

/// The error and its causes as one string.
pub fn error_chain(error: &dyn Error) -> String {
    ErrorChain(error).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot submit")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[test]
    fn every_cause_is_printed_once_in_order() {
        assert_eq!(
            error_chain(&Outer(Inner)),
            "cannot submit: connection refused"
        );
        assert_eq!(error_chain(&Inner), "connection refused");
    }
}
