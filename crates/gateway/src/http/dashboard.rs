//! The owner dashboard (`web/`), bundled into the binary so it works from
//! the binary alone with no network. It is static: the page reads the same
//! public API as curl, with the read token when one is set, so serving it
//! needs no token.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::AppState;

const INDEX: &str = include_str!("../../../../web/index.html");
const SCRIPT: &str = include_str!("../../../../web/app.js");
const STYLE: &str = include_str!("../../../../web/style.css");

/// `/`, `/app.js` and `/style.css`.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route(
            "/app.js",
            get(|| asset("text/javascript; charset=utf-8", SCRIPT)),
        )
        .route(
            "/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE)),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            // Everything the page needs comes from this gateway.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'",
            ),
        ],
        body,
    )
}
