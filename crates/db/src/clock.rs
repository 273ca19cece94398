//! The database's clock: the one time that decides what several processes share.

use crate::{Backend, Conn, DbError, params};

impl dyn Conn + '_ {
    /// Now on the database's clock, in milliseconds since the Unix epoch: the one time that
    /// decides leases, expiries and waits shared by several processes, so that replicas on
    /// hosts whose clocks disagree still agree on whose lease ran out. PostgreSQL's
    /// `clock_timestamp()` (the time of the call, not of the transaction's start, which may
    /// have waited for the write lock); on `SQLite` the host's clock, the one clock of every
    /// process sharing the file.
    ///
    /// # Errors
    ///
    /// The engine's error.
    pub fn now_millis(&mut self) -> Result<i64, DbError> {
        let sql = match self.backend() {
            Backend::Postgres => {
                "SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)"
            }
            Backend::Sqlite => "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        };
        self.query_value(sql, params![])?
            .ok_or_else(|| DbError::Column {
                index: 0,
                message: "the database gave no time".to_owned(),
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::Database;

    /// The database's clock, read in a read and in a write, moves forward and agrees with
    /// this host's (the test's server runs here) to a second: milliseconds, not seconds or
    /// microseconds.
    pub(crate) fn database_clock_is_the_hosts_to_a_second(database: &Database) {
        let host_millis = || {
            i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis(),
            )
            .unwrap()
        };
        let before = host_millis();
        let first = database.read(|connection| connection.now_millis()).unwrap();
        let second = database
            .write(|connection| connection.now_millis())
            .unwrap();
        let after = host_millis();
        assert!(first <= second, "{first} then {second}");
        assert!(
            before - 1_000 <= first && second <= after + 1_000,
            "host {before}..{after}, database {first}..{second}"
        );
    }
}
