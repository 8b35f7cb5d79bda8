/**
 * Which back ends fail fast (BackendPool.setFailFast): in ring mode, a ring server given by its
 * address, as nutcracker serves one. A server that is down gets no reconnect backoff and its
 * requests are not retried: each gets the OS's reason within a round trip, and the next request
 * tries the server again. Not a Sentinel master's server (its requests wait for the promotion),
 * nor a cluster side of a migration (it rides out its failovers as cluster mode does).
 */
import { Ring } from '../../sharding/ring';
import { RingRouter } from './router';

export function ringServerFailsFast(router: RingRouter, followsSentinel: (address: string) => boolean): (address: string) => boolean {
  return (address) => {
    const { from, to } = router.placement;
    const onRing = [from, to].some((side) => side instanceof Ring && side.addresses.includes(address));
    return onRing && !followsSentinel(address);
  };
}
