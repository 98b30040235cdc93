// Signing in on the Cognito hosted UI: the authorization code flow with PKCE (RFC 7636).
//
// The page sends the visitor to `<authUrl>/oauth2/authorize` with a random `state` and
// the SHA-256 challenge of a random verifier, both kept in this tab's sessionStorage.
// The hosted UI sends them back to the page with a code, which only the holder of the
// verifier can exchange at `<authUrl>/oauth2/token`. Only the ID token is kept: it is
// what the API's Cognito authorizer reads.

const PENDING_KEY = "interlock.signIn";
const SCOPES = "openid email profile";

/** Where the hosted UI sends people back to: the page's own directory URL. */
export function callbackUrl() {
  return new URL("./", location.href).href;
}

/** Go to the hosted UI; this page comes back (with `back`, its query) once signed in. */
export async function beginSignIn(config) {
  const verifier = randomString(32);
  const state = randomString(16);
  const pending = { state, verifier, back: location.search };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const query = new URLSearchParams({
    response_type: "code",
    client_id: config.clientId,
    redirect_uri: callbackUrl(),
    scope: SCOPES,
    state,
    code_challenge: await challenge(verifier),
    code_challenge_method: "S256",
  });
  location.assign(`${authBase(config)}/oauth2/authorize?${query}`);
}

/**
 * Finish the sign-in this tab started. Returns null when the URL carries no reply, else
 * `{idToken, back}` with the URL to return to. Throws on a reply this tab did not ask
 * for (a `state` that is not the one it sent), without exchanging its code.
 */
export async function finishSignIn(config, params) {
  if (!params.has("code") && !params.has("error")) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
  sessionStorage.removeItem(PENDING_KEY); // one reply per request, whatever it says
  if (!pending || params.get("state") !== pending.state) {
    throw new Error("Sign-in refused: the reply does not match a sign-in from this tab.");
  }
  if (params.has("error")) {
    throw new Error(`Sign-in failed: ${params.get("error_description") || params.get("error")}`);
  }
  const response = await fetch(`${authBase(config)}/oauth2/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: config.clientId,
      code: params.get("code"),
      redirect_uri: callbackUrl(),
      code_verifier: pending.verifier,
    }),
    cache: "no-store",
  });
  const tokens = response.ok ? await response.json() : {};
  if (!tokens.id_token) throw new Error(`Sign-in failed: HTTP ${response.status} from sign-in.`);
  return { idToken: tokens.id_token, back: callbackUrl() + pending.back };
}

/** The hosted UI's sign-out, which ends its session and comes back to the page. */
export function signOutUrl(config) {
  const query = new URLSearchParams({ client_id: config.clientId, logout_uri: callbackUrl() });
  return `${authBase(config)}/logout?${query}`;
}

/** An ID token's claims, for display and expiry only: the API verifies the signature. */
export function claims(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload));
  } catch {
    return {};
  }
}

function authBase(config) {
  return config.authUrl.replace(/\/$/, "");
}

function randomString(size) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function challenge(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function base64url(bytes) {
  const text = btoa(String.fromCharCode(...bytes));
  return text.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
