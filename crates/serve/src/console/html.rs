//! The console's HTML: every page is built here from escaped text, and nothing else writes
//! markup. Whatever a model, a guest or a component wrote (arguments, output, descriptions,
//! ids) is made visible by [`for_human`] (controls, invisible and look-alike characters as
//! `\u{…}`) and then escaped by [`text`], so it can only ever be text. Pages carry no script
//! and load nothing but the console's own stylesheet.

use std::fmt::Write as _;

use toolhost_contract::for_human;

/// `s` escaped for HTML text and attribute values: `&`, `<`, `>`, `"` and `'` as entities.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text made visible, then escaped.
pub fn shown(s: &str) -> String {
    text(&for_human(s))
}

/// `value` as one query-string value.
pub fn query(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Who is signed in, for the header of every page.
pub struct Signed<'a> {
    pub operator: &'a str,
    pub csrf: &'a str,
}

/// A whole page: the header (the operator, sign-out) when signed in, then `body`.
pub fn page(title: &str, signed: Option<&Signed<'_>>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    out.push_str(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">",
    );
    let _ = write!(
        out,
        "<title>{} · toolhost console</title>\
         <link rel=\"stylesheet\" href=\"/console/style.css\"></head><body><header>\
         <a class=\"home\" href=\"/console\">toolhost · approvals</a>",
        text(title)
    );
    if let Some(s) = signed {
        let _ = write!(
            out,
            "<span class=\"who\">operator <b>{}</b></span>\
             <form method=\"post\" action=\"/console/sign-out\">{}\
             <button type=\"submit\">Sign out</button></form>",
            shown(s.operator),
            csrf_field(s.csrf)
        );
    }
    out.push_str("</header><main>");
    out.push_str(body);
    out.push_str("</main></body></html>\n");
    out
}

/// The hidden field every form of a session carries.
pub fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        text(csrf)
    )
}

/// A definition list of (label, value) rows; a value on several lines is preformatted.
pub fn rows<'a>(rows: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut out = String::from("<dl>");
    for (label, value) in rows {
        let value = if value.contains('\n') {
            format!("<pre>{}</pre>", text(&value))
        } else {
            text(&value)
        };
        let _ = write!(out, "<dt>{}</dt><dd>{value}</dd>", text(label));
    }
    out.push_str("</dl>");
    out
}

/// The sign-in page, with `problem` said above the form when there is one.
pub fn sign_in(problem: Option<&str>) -> String {
    let said = problem
        .map(|p| format!("<p class=\"problem\" role=\"alert\">{}</p>", text(p)))
        .unwrap_or_default();
    page(
        "Sign in",
        None,
        &format!(
            "<h1>Sign in</h1>{said}\
             <form method=\"post\" action=\"/console/sign-in\">\
             <label>Operator token <input type=\"password\" name=\"token\" \
             autocomplete=\"current-password\" required></label>\
             <button type=\"submit\">Sign in</button></form>\
             <p class=\"note\">An operator token from <code>[[serve.console.operator]]</code>. \
             An MCP caller's token does not open the console.</p>"
        ),
    )
}

/// The stylesheet, served from the console's own path (the only thing a page loads).
pub const STYLE: &str = "\
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#f6f6f4}\
header{display:flex;gap:1.2em;align-items:center;padding:.6em 1.2em;background:#1f2a37;color:#fff}\
header a.home{color:#fff;font-weight:600;text-decoration:none;margin-right:auto}\
header form{margin:0}main{max-width:64em;margin:1.2em auto;padding:0 1.2em}\
table{border-collapse:collapse;width:100%;background:#fff}\
th,td{text-align:left;padding:.4em .6em;border-bottom:1px solid #ddd;vertical-align:top}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1em;background:#fff;padding:1em;border:1px solid #ddd}\
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}\
pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;background:#f0f0ee;padding:.5em}\
.decide{display:flex;gap:1em;margin:1em 0}.decide form{margin:0}\
button{font:inherit;padding:.4em 1em;cursor:pointer}\
button.approve{background:#1a7f37;color:#fff;border:0}button.deny{background:#b42318;color:#fff;border:0}\
.problem{color:#b42318;font-weight:600}.note{color:#555}\
.status-completed{color:#1a7f37}.status-failed{color:#b42318}\
";

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup in any text is escaped; quotes cannot close an attribute.
    #[test]
    fn markup_is_text() {
        assert_eq!(
            text("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let p = page("<b>", None, "");
        assert!(p.contains("<title>&lt;b&gt; · toolhost console</title>"));
    }

    /// Invisible characters are shown as escapes before the markup is escaped.
    #[test]
    fn invisible_text_is_shown() {
        assert_eq!(shown("a\u{E0041}<"), "a\\u{e0041}&lt;");
    }
}
