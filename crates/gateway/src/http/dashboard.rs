//! The owner dashboard (`web/`), bundled into the binary so it works from
//! the binary alone with no network. It is static: the page reads the same
//! public API as curl, with the read token when one is set, so serving it
//! needs no token. Its script is plain ES modules, one file each, served
//! from [`ASSETS`].

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::AppState;

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file of `web/`: its path, content type and text.
const ASSETS: &[(&str, &str, &str)] = &[
    ("/", HTML, include_str!("../../../../web/index.html")),
    ("/style.css", CSS, include_str!("../../../../web/style.css")),
    ("/app.js", JS, include_str!("../../../../web/app.js")),
    ("/api.js", JS, include_str!("../../../../web/api.js")),
    (
        "/changes.js",
        JS,
        include_str!("../../../../web/changes.js"),
    ),
    (
        "/cluster.js",
        JS,
        include_str!("../../../../web/cluster.js"),
    ),
    ("/detail.js", JS, include_str!("../../../../web/detail.js")),
    ("/format.js", JS, include_str!("../../../../web/format.js")),
    ("/groups.js", JS, include_str!("../../../../web/groups.js")),
    ("/live.js", JS, include_str!("../../../../web/live.js")),
    ("/table.js", JS, include_str!("../../../../web/table.js")),
    (
        "/tenures.js",
        JS,
        include_str!("../../../../web/tenures.js"),
    ),
    (
        "/timeline.js",
        JS,
        include_str!("../../../../web/timeline.js"),
    ),
];

/// A route per file of [`ASSETS`].
pub(crate) fn router() -> Router<AppState> {
    ASSETS
        .iter()
        .fold(Router::new(), |router, &(path, content_type, body)| {
            router.route(path, get(move || asset(content_type, body)))
        })
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

#[cfg(test)]
mod tests {
    use super::ASSETS;

    /// The paths a module imports (`from './x.js'`).
    fn imports(source: &str) -> Vec<String> {
        source
            .split("from './")
            .skip(1)
            .map(|rest| format!("/{}", &rest[..rest.find('\'').expect("a closing quote")]))
            .collect()
    }

    #[test]
    fn every_module_the_page_imports_is_bundled() {
        let served: Vec<&str> = ASSETS.iter().map(|(path, _, _)| *path).collect();
        let mut missing = Vec::new();
        for (path, _, body) in ASSETS.iter().filter(|(p, _, _)| p.ends_with(".js")) {
            for import in imports(body) {
                if !served.contains(&import.as_str()) {
                    missing.push(format!("{path} imports {import}"));
                }
            }
        }
        assert_eq!(missing, Vec::<String>::new());
        assert!(served.contains(&"/app.js"), "the page's entry module");
    }

    #[test]
    fn the_page_preloads_every_module() {
        let index = ASSETS[0].2;
        let unloaded: Vec<&str> = ASSETS
            .iter()
            .map(|(path, _, _)| *path)
            .filter(|path| path.ends_with(".js"))
            .filter(|path| {
                !index.contains(&format!(
                    "<link rel=\"modulepreload\" href=\"{}\">",
                    &path[1..]
                ))
            })
            .collect();
        assert_eq!(unloaded, Vec::<&str>::new());
    }

    #[test]
    fn every_file_of_web_is_bundled() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("web/")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .map(|name| {
                if name == "index.html" {
                    "/".into()
                } else {
                    format!("/{name}")
                }
            })
            .collect();
        files.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|(p, _, _)| p.to_string()).collect();
        served.sort();
        assert_eq!(served, files);
    }
}
