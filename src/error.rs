//! The library's error type.
//!
//! Every error knows where it happened in a way a user can act on: the file (and the line of a
//! stream), the place inside the dump (a JSON path such as `memories[1].allocations[42].size`, or
//! `line 3, column 17` for a syntax error), and what was wrong. The binary prints
//! `error: <file>: <place>: <what>` and maps [`Error::exit_code`] to the process status.
//!
//! An error that another library's error caused (SQLite's, the file system's) keeps it as its
//! `source()`, so a caller can act on it (a busy database, a missing file); the message already
//! says what the source says, so the one line the binary prints is whole.

use std::fmt;

/// The error of another library that caused one of ours.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong, as said to the user, and the error behind it when there is one.
#[derive(Debug)]
pub struct Because {
    pub message: String,
    pub source: Option<Cause>,
}

impl Because {
    /// `what: <the error>`, keeping the error as the source.
    pub fn context(
        what: impl fmt::Display,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Because {
        Because {
            message: format!("{what}: {error}"),
            source: Some(Box::new(error)),
        }
    }

    /// A message with the error that caused it (the message said in the user's terms).
    pub fn told(
        message: impl Into<String>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Because {
        Because {
            message: message.into(),
            source: Some(Box::new(error)),
        }
    }
}

impl From<rusqlite::Error> for Because {
    fn from(error: rusqlite::Error) -> Because {
        Because {
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }
}

impl From<std::io::Error> for Because {
    fn from(error: std::io::Error) -> Because {
        Because {
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }
}

impl From<String> for Because {
    fn from(message: String) -> Because {
        Because {
            message,
            source: None,
        }
    }
}

impl From<&str> for Because {
    fn from(message: &str) -> Because {
        Because::from(message.to_string())
    }
}

/// Where in the input an error was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file as the user named it (`-` for standard input), with `:LINE` for a stream record
    /// or a line of a log.
    pub file: String,
    /// The JSON path inside the dump, or `line L, column C` for a syntax error; `None` when
    /// what is wrong is the file (or the line) as a whole.
    pub place: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Some(place) => write!(f, "{}: {place}", self.file),
            None => write!(f, "{}", self.file),
        }
    }
}

/// Everything that can go wrong in the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input (a dump, an annotations file, a stream record) was refused.
    #[error("{location}: {message}")]
    Input { location: Location, message: String },

    /// An input could not be read at all (missing file, permission, corrupt compression).
    #[error("{file}: {message}")]
    Read {
        file: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    /// An input that is none of the kinds memstate reads (no dump, no log of a known producer,
    /// no snapshot): refused when named, skipped when found inside a folder.
    #[error("{file}: {message}")]
    Unrecognized { file: String, message: String },

    /// The database could not be opened, migrated or written.
    #[error("{file}: {message}")]
    Database {
        file: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    /// The user asked for something that cannot be done (bad option value, unknown query...).
    #[error("{0}")]
    Usage(String),

    /// What the user named is not in the database (a snapshot, a memory, a run), or the database
    /// holds nothing yet to answer from.
    #[error("{0}")]
    NotFound(String),

    /// A query the user wrote (or a canned one with the user's parameters) failed.
    #[error("query: {message}")]
    Query {
        message: String,
        #[source]
        source: Option<Cause>,
    },

    /// A file memstate was asked to write (a page, a chart, a simulated run) could not be written.
    #[error("{file}: cannot write: {message}")]
    Write {
        file: String,
        message: String,
        #[source]
        source: Option<Cause>,
    },

    /// Standard output could not be written (a closed pipe ends a command quietly, see
    /// [`Error::is_closed_output`]).
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),

    /// The user stopped the work (Ctrl-C, SIGTERM): what was in progress was rolled back.
    #[error("interrupted")]
    Interrupted,

    /// memstate itself failed (a bug) while working on `file`.
    #[error("{file}: {message}")]
    Internal { file: String, message: String },
}

impl Error {
    /// An input error at `place` (a JSON path) in `file`; the root path (empty) is the file as a
    /// whole, as [`Error::whole_input`] says.
    pub fn input(
        file: impl Into<String>,
        place: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        let place: String = place.into();
        Error::Input {
            location: Location {
                file: file.into(),
                place: Some(place).filter(|place| !place.is_empty()),
            },
            message: message.into(),
        }
    }

    /// An input error about `file` (or `file:LINE`) as a whole, at no place inside it.
    pub fn whole_input(file: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Input {
            location: Location {
                file: file.into(),
                place: None,
            },
            message: message.into(),
        }
    }

    /// A database error for the database at `file`.
    pub fn database(file: impl Into<String>, because: impl Into<Because>) -> Error {
        let Because { message, source } = because.into();
        Error::Database {
            file: file.into(),
            message,
            source,
        }
    }

    /// A query that failed.
    pub fn query(because: impl Into<Because>) -> Error {
        let Because { message, source } = because.into();
        Error::Query { message, source }
    }

    /// An input that could not be read at all.
    pub fn read(file: impl Into<String>, because: impl Into<Because>) -> Error {
        let Because { message, source } = because.into();
        Error::Read {
            file: file.into(),
            message,
            source,
        }
    }

    /// The exit status this error maps to: 1 when an input was refused, 2 for usage or environment.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input { .. } | Error::Read { .. } | Error::Unrecognized { .. } => 1,
            Error::Database { .. }
            | Error::Usage(_)
            | Error::NotFound(_)
            | Error::Query { .. }
            | Error::Write { .. }
            | Error::Output(_)
            | Error::Internal { .. } => 2,
            // As a shell reports a process ended by SIGINT.
            Error::Interrupted => 130,
        }
    }

    /// A file that could not be written.
    pub fn write(file: &std::path::Path, because: impl Into<Because>) -> Error {
        let Because { message, source } = because.into();
        Error::Write {
            file: file.display().to_string(),
            message,
            source,
        }
    }

    /// Whether this is the refusal of an input that is none of the kinds memstate reads.
    pub fn is_unrecognized(&self) -> bool {
        matches!(self, Error::Unrecognized { .. })
    }

    /// Whether this is standard output closed by its reader (`memstate holes | head`): not an
    /// error for the user, the command just stops.
    pub fn is_closed_output(&self) -> bool {
        matches!(self, Error::Output(error) if error.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
