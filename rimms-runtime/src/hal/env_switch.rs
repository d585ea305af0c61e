//! The on/off environment variables (`RIMMS_TRACE`, `RIMMS_FPGA_STRICT`, `RIMMS_STATS_PAGE`),
//! read one way: every switch takes the same words, and a value that is none of them is an
//! error naming the variable, never a silent "off" that looks like a program doing nothing.

use std::fmt;

/// Whether the switch `var` is on: `Ok(false)` when unset or empty.
pub(crate) fn env_switch(var: &'static str) -> Result<bool, NotASwitch> {
    match std::env::var_os(var) {
        None => Ok(false),
        Some(value) => {
            let value = value.to_string_lossy();
            switch(&value).ok_or_else(|| NotASwitch {
                var,
                value: value.into_owned(),
            })
        }
    }
}

/// A switch's value, `None` if `text` is not one.
fn switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

/// A switch variable holds something that is not a switch.
#[derive(Debug)]
pub(crate) struct NotASwitch {
    var: &'static str,
    value: String,
}

impl fmt::Display for NotASwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?} is not a switch: use 1, true, yes or on (0, false, no, off or empty for off)",
            self.var, self.value
        )
    }
}

impl std::error::Error for NotASwitch {}

impl From<NotASwitch> for super::Error {
    fn from(e: NotASwitch) -> Self {
        super::Error::Config(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::switch;

    #[test]
    fn switches_take_the_usual_words_and_nothing_else() {
        for on in ["1", "true", "TRUE", "yes", "Yes", "on", " on "] {
            assert_eq!(switch(on), Some(true), "{on}");
        }
        for off in ["0", "false", "no", "off", "OFF", ""] {
            assert_eq!(switch(off), Some(false), "{off}");
        }
        for neither in ["2", "ture", "enable", "y", "banana"] {
            assert_eq!(switch(neither), None, "{neither}");
        }
    }
}
