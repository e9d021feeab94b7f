//! The routing key: a thread id a proxy can read without the body, so that each thread reaches
//! one replica (`hash $http_x_thread_id consistent;` in nginx). A client names the thread in
//! the `X-Thread-Id` header (HttpAgent's `headers` option) or in the path
//! (`<path>/threads/<threadId>`, and `/connect`, `/stop` under it); the body's `threadId` must
//! then agree, or the request is refused (400) before anything runs.

use axum::http::HeaderMap;

/// The header a client names the thread in.
pub(crate) const THREAD_HEADER: &str = "x-thread-id";

/// Where a request named its thread besides the body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct RoutedThread {
    header: Option<String>,
    path: Option<String>,
}

impl RoutedThread {
    /// The header's thread id (if any) and the path's (`path`, from a `/threads/<id>` route).
    pub(crate) fn new(headers: &HeaderMap, path: Option<String>) -> Result<Self, String> {
        let header = match headers.get(THREAD_HEADER) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| format!("the `{THREAD_HEADER}` header is not plain text"))?
                    .trim()
                    .to_owned(),
            ),
        };
        let routed = Self { header, path };
        if let (Some(header), Some(path)) = (&routed.header, &routed.path)
            && header != path
        {
            return Err(format!(
                "the `{THREAD_HEADER}` header names thread `{header}` but the path names `{path}`; they must be the same"
            ));
        }
        Ok(routed)
    }

    /// The thread id the route names, if it names one.
    pub(crate) fn thread_id(&self) -> Option<&str> {
        self.path.as_deref().or(self.header.as_deref())
    }

    /// Checks the body's thread id against the route's (a proxy routed the request by the
    /// route's: a body naming another thread would be served by the wrong replica).
    pub(crate) fn agrees_with(&self, body_thread: &str) -> Result<(), String> {
        let mismatch = |source: &str, named: &str| {
            format!(
                "the body's threadId `{body_thread}` differs from the thread `{named}` named by {source}; send the same id in both (proxies route by {source})"
            )
        };
        if let Some(path) = &self.path
            && path != body_thread
        {
            return Err(mismatch("the path", path));
        }
        if let Some(header) = &self.header
            && header != body_thread
        {
            return Err(mismatch(&format!("the `{THREAD_HEADER}` header"), header));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(thread: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(thread) = thread {
            headers.insert(THREAD_HEADER, thread.parse().unwrap());
        }
        headers
    }

    #[test]
    fn header_path_and_body_must_name_the_same_thread() {
        let none = RoutedThread::new(&headers(None), None).unwrap();
        assert_eq!(none.thread_id(), None);
        assert_eq!(none.agrees_with("t1"), Ok(()));

        let header = RoutedThread::new(&headers(Some("t1")), None).unwrap();
        assert_eq!(header.thread_id(), Some("t1"));
        assert_eq!(header.agrees_with("t1"), Ok(()));
        let err = header.agrees_with("t2").unwrap_err();
        assert!(
            err.contains("`t2`") && err.contains("`t1`") && err.contains("header"),
            "{err}"
        );

        let path = RoutedThread::new(&headers(None), Some("t1".into())).unwrap();
        assert!(path.agrees_with("t2").unwrap_err().contains("the path"));

        let both = RoutedThread::new(&headers(Some("t1")), Some("t1".into())).unwrap();
        assert_eq!(both.agrees_with("t1"), Ok(()));
        let err = RoutedThread::new(&headers(Some("t1")), Some("t2".into())).unwrap_err();
        assert!(err.contains("header") && err.contains("path"), "{err}");
    }
}
