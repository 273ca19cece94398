//! Cost of checking a request's token, against the SHA-256 digest it starts with.

use streetlevel_auth::{AuthStore, Config, FakeClock, Scopes, SeededRandom};

fn main() {
    divan::main();
}

/// A store holding 10,000 apps, and the client tokens of all of them.
fn store_with_apps() -> (AuthStore, Vec<String>) {
    store_with_apps_and(Config::insecure_fast())
}

/// [`store_with_apps`] with `config`.
fn store_with_apps_and(config: Config) -> (AuthStore, Vec<String>) {
    let store = AuthStore::open_in_memory(config, FakeClock::default(), SeededRandom::new(7))
        .expect("store");
    let tokens = (0..10_000)
        .map(|index| {
            store
                .create_app(
                    &format!("app {index}"),
                    "https://app.example/cb",
                    Scopes::READ,
                )
                .expect("app")
                .client_token
        })
        .collect();
    (store, tokens)
}

/// Baseline: the SHA-256 of a token, the least any digest lookup must do.
#[divan::bench]
fn baseline_sha256(bencher: divan::Bencher) {
    use sha2::Digest;
    let token = "slc_".to_owned() + &"x".repeat(43);
    bencher.bench_local(|| sha2::Sha256::digest(divan::black_box(token.as_bytes())));
}

/// `check_token` on one of 10,000 valid client tokens, in turn: answered from the token cache
/// (10,000 entries) once each token was read.
#[divan::bench]
fn check_token_valid(bencher: divan::Bencher) {
    check_valid(bencher, Config::insecure_fast());
}

/// The same with the token cache off: every check reads `SQLite`.
#[divan::bench]
fn check_token_valid_uncached(bencher: divan::Bencher) {
    check_valid(
        bencher,
        Config {
            token_cache_ttl: std::time::Duration::ZERO,
            ..Config::insecure_fast()
        },
    );
}

fn check_valid(bencher: divan::Bencher, config: Config) {
    let (store, tokens) = store_with_apps_and(config);
    for token in &tokens {
        store.check_token(token).expect("valid");
    }
    let mut index = 0;
    bencher.bench_local(|| {
        index = (index + 1) % tokens.len();
        store
            .check_token(divan::black_box(&tokens[index]))
            .expect("valid")
    });
}

/// `check_token` on an unknown token (the cost an attacker can make us pay).
#[divan::bench]
fn check_token_unknown(bencher: divan::Bencher) {
    let (store, _tokens) = store_with_apps();
    let token = "slc_".to_owned() + &"x".repeat(43);
    bencher.bench_local(|| store.check_token(divan::black_box(&token)).is_err());
}

/// `authenticate` on a request carrying the token in both the query and the header, as the
/// Python SDK sends it.
#[divan::bench]
fn authenticate_request(bencher: divan::Bencher) {
    let (store, tokens) = store_with_apps();
    let token = &tokens[17];
    let (parts, ()) = http::Request::get(format!(
        "/maps/vtp/svc1_public/2/14/8000/5000?access_token={token}"
    ))
    .header("authorization", format!("OAuth {token}"))
    .body(())
    .expect("request")
    .into_parts();
    bencher.bench_local(|| store.authenticate(divan::black_box(&parts)).expect("valid"));
}
