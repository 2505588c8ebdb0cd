//! The console's files, compiled into the binary (no file is read at run
//! time, no CDN): plain HTML, CSS and JavaScript modules, no build step.
//! The sources are in `shared/console-ui/`.

/// A file of the console: its name below `console/`, media type and text.
pub struct Asset {
    /// The path below `/console/`, e.g. `app.js`.
    pub name: &'static str,
    /// The `Content-Type` it is served with.
    pub content_type: &'static str,
    /// The file's text, embedded at build time.
    pub body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../../console-ui/", $name)),
        }
    };
}

/// The page itself, served at `/console`.
pub const INDEX: Asset = asset!("index.html", HTML);

/// Everything served below `/console/`.
pub const FILES: &[Asset] = &[
    asset!("console.css", CSS),
    asset!("icon.svg", SVG),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("view.js", JS),
    asset!("auth.js", JS),
    asset!("oauth.js", JS),
    asset!("dom.js", JS),
    asset!("format.js", JS),
    asset!("signin.js", JS),
    asset!("subscriptions.js", JS),
    asset!("subscription-form.js", JS),
    asset!("event-types.js", JS),
    asset!("deliveries.js", JS),
    asset!("notification.js", JS),
    asset!("chart.js", JS),
];

/// The console file at `name` below `/console/`, if there is one.
pub fn find(name: &str) -> Option<&'static Asset> {
    FILES.iter().find(|a| a.name == name)
}
