import { BadRequestException, Body, Controller, Get, NotFoundException, Param, ParseIntPipe, Post } from '@nestjs/common';
import { OrdersService, type OrderView } from './orders.service';

/** Body of `POST /orders`. */
interface PlaceOrderBody {
  item?: unknown;
  /** true: throw after the enqueue, so the transaction rolls back. */
  fail?: unknown;
}

@Controller('orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  place(@Body() body: PlaceOrderBody): Promise<OrderView> {
    if (typeof body?.item !== 'string' || body.item.trim() === '') {
      throw new BadRequestException('Send JSON like {"item": "book"}; add "fail": true to see a rollback.');
    }
    return this.orders.place(body.item, body.fail === true);
  }

  @Get(':id')
  async get(@Param('id', ParseIntPipe) id: number): Promise<OrderView> {
    const view = await this.orders.find(id);
    if (!view) throw new NotFoundException(`Order ${id} does not exist.`);
    return view;
  }
}
