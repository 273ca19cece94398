//! The settings' own rules: public URLs, the merge order, the documented table.

use super::*;

#[test]
fn public_urls_must_be_absolute_http_or_https() {
    for good in [
        "http://127.0.0.1:8080",
        "https://streetlevel.example/",
        "HTTPS://Streetlevel.Example/prefix",
    ] {
        assert!(
            check_public_url("url", Some(&good.to_owned())).is_ok(),
            "{good}"
        );
    }
    for bad in [
        "streetlevel.example",
        "https://",
        "http:///path",
        "ftp://streetlevel.example",
        "/relative",
        "",
    ] {
        let error = check_public_url("tiles_url", Some(&bad.to_owned())).unwrap_err();
        assert!(error.to_string().contains("tiles_url"), "{bad}: {error}");
    }
    assert!(check_public_url("url", None).is_ok());
}

#[test]
fn the_command_line_wins_over_the_file_member_by_member() {
    let dir = std::env::temp_dir().join(format!("settings-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.json");
    std::fs::write(
        &file,
        r#"{"short_name": "file", "limit_search_per_min": 5, "tile_max_age_seconds": 60}"#,
    )
    .unwrap();
    let command_line = Settings {
        short_name: Some(String::from("flag")),
        max_connections: Some(3),
        ..Settings::default()
    };
    let merged = merge(&command_line, Some(&file)).unwrap();
    assert_eq!(merged.short_name.as_deref(), Some("flag"));
    assert_eq!(merged.limit_search_per_min, NonZeroU32::new(5));
    assert_eq!(merged.tile_max_age_seconds, Some(60));
    assert_eq!(merged.max_connections, Some(3));
    assert_eq!(merged.addr, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// docs/API.md's table names every setting with its flag and its variable, or says it is
/// read from the file only.
#[test]
fn every_setting_is_in_the_documented_table() {
    let docs = include_str!("../../../../../docs/API.md");
    for name in names() {
        let flag = format!("`--{}`", name.replace('_', "-"));
        let variable = format!("`STREETLEVEL_{}`", name.to_uppercase());
        let row = docs
            .lines()
            .find(|line| line.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/API.md has no row for `{name}`"));
        if FILE_ONLY.contains(&name.as_str()) {
            assert!(row.contains("| file only | file only |"), "{row}");
            continue;
        }
        assert!(row.contains(&flag), "{row} lacks {flag}");
        assert!(row.contains(&variable), "{row} lacks {variable}");
    }
}
