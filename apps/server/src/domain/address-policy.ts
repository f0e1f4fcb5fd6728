/**
 * Which IP addresses the service may fetch reference media from (D5: "public unicast only").
 * Pure: no I/O. The fetcher applies this to every address a host name resolves to, at the
 * moment it connects, so a name cannot be re-pointed at an internal address after a check.
 */
import ipaddr from 'ipaddr.js';

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

// IANA allocates global unicast only from 2000::/3. ipaddr.js calls everything it has no name
// for "unicast", which would wave through IPv4-compatible (::7f00:1) and unallocated space.
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3') as [IPv6, number];
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96') as [IPv6, number];

/**
 * True only for an address in ipaddr.js's `unicast` range — not loopback, private, link-local
 * (cloud metadata at 169.254.169.254), unique-local, CGNAT, multicast, broadcast, unspecified,
 * reserved, benchmarking or documentation space. IPv6 that carries an IPv4 address (mapped,
 * translated, NAT64, 6to4, Teredo) is judged by that IPv4 address, since that is where packets go.
 * Anything that is not a canonical address (e.g. "0177.0.0.1") is refused rather than guessed at.
 */
export function isPublicUnicast(address: string): boolean {
  const parsed = parseCanonical(address);
  if (!parsed) return false;
  if (parsed.kind() === 'ipv4') return parsed.range() === 'unicast';
  const v6 = parsed as IPv6;
  const embedded = embeddedIPv4(v6);
  if (embedded) return embedded.length > 0 && embedded.every((v4) => v4.range() === 'unicast');
  return v6.range() === 'unicast' && v6.match(GLOBAL_UNICAST_V6);
}

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped forms: what the test-only loopback switch lets through. */
export function isLoopback(address: string): boolean {
  return parseCanonical(address) !== undefined && ipaddr.process(address).range() === 'loopback';
}

/**
 * A URL's host as a resolver sees it, for the rules that judge a host by its spelling. WHATWG
 * `URL.hostname` has already lower-cased it, percent-decoded it, IDNA-mapped it (full-width
 * letters and digits, `。` for `.`, soft hyphens dropped) and rewritten every IPv4 spelling
 * (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `127.0.0.1.`) and IPv6 spelling
 * (`[0:0:0:0:0:0:0:1]`, `[::ffff:127.0.0.1]`) into one form. Left here: the brackets of an IPv6
 * address, and trailing dots on a name: `localhost.` is the fully qualified spelling of
 * `localhost`, the same name to every resolver. The lower-casing is repeated for a hostname
 * that did not come from a URL.
 */
export function hostForRules(hostname: string): string {
  const unbracketed = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  let end = unbracketed.length;
  while (end > 0 && unbracketed.charCodeAt(end - 1) === 0x2e) end--;
  return unbracketed.slice(0, end).toLowerCase();
}

/** `localhost` and every name under it (RFC 6761: they are loopback, whatever DNS says), given as `hostForRules` returns it. */
export const isLocalhostName = (host: string): boolean => host === 'localhost' || host.endsWith('.localhost');

function parseCanonical(address: string): IPv4 | IPv6 | undefined {
  if (ipaddr.IPv4.isValidFourPartDecimal(address)) return ipaddr.IPv4.parse(address);
  if (ipaddr.IPv6.isValid(address)) return ipaddr.IPv6.parse(address);
  return undefined;
}

/** The IPv4 addresses an IPv6 address stands for; [] when it embeds one we cannot place; undefined when none. */
function embeddedIPv4(v6: IPv6): IPv4[] | undefined {
  const p = v6.parts;
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (v6.range()) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d
    case 'rfc6145': // ::ffff:0:a.b.c.d
      return [v4(p[6]!, p[7]!)];
    case 'rfc6052': // NAT64; the local-use 64:ff9b:1::/48 places the address per network, so refuse it
      return v6.match(NAT64_WELL_KNOWN) ? [v4(p[6]!, p[7]!)] : [];
    case '6to4': // 2002:AABB:CCDD::
      return [v4(p[1]!, p[2]!)];
    case 'teredo': // 2001:0:server:flags:port:~client — both ends must be public
      return [v4(p[2]!, p[3]!), v4(~p[6]! & 0xffff, ~p[7]! & 0xffff)];
    default:
      return undefined;
  }
}
